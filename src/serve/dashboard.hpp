// The dashboard's pages: a shell of static HTML (study text never reaches it: the script fills
// it in with textContent only) and one script, served from the server's own origin so the
// Content-Security-Policy admits no inline script at all.
#pragma once

#include <string>
#include <string_view>

namespace mira::serve::detail {

/// The runs list (empty `run_id`) or one run's live page. `run_id` must have passed
/// check_run_id; it is escaped anyway.
std::string dashboard_page(std::string_view run_id);
/// One case of a saved run (the viewer). Both are escaped.
std::string case_page(std::string_view run_id, std::string_view key);
/// Two runs compared (their ids are the page's query, read by the script), and one case of
/// both side by side.
std::string compare_page();
std::string compare_case_page(std::string_view key);
/// /dashboard.js
std::string_view dashboard_script();
/// /viewer.js: the run page's table of cases and the case page.
std::string_view viewer_script();
/// The Content-Security-Policy header of the pages.
std::string_view dashboard_csp();

}  // namespace mira::serve::detail
