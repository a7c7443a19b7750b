// GitHub Actions output of `mira run` and `mira score`, when GITHUB_ACTIONS is "true" and
// --no-github is not given: an error annotation for each failed or errored case, and the
// Markdown report appended to the step summary ($GITHUB_STEP_SUMMARY).
#pragma once

#include "console.hpp"

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace mira::cli {

/// GitHub's cap on one step's summary: a bigger one is refused whole ("$GITHUB_STEP_SUMMARY
/// upload aborted, supports content up to a size of 1024k").
inline constexpr std::size_t step_summary_limit = 1024 * 1024;

/// Whether to write for GitHub: GITHUB_ACTIONS is "true" and --no-github was not given.
bool github_output_on(const run_args& a, const env_reader& env);

/// Appends `markdown` to the step summary file at `path` (made when missing), never replacing
/// what earlier steps or commands wrote. What would take the file past `limit` is cut at a line
/// break, and a line says so. Returns what went wrong, or what was cut; nullopt when all of it
/// was written.
std::optional<std::string> append_step_summary(const std::filesystem::path& path,
                                               std::string_view markdown,
                                               std::size_t limit = step_summary_limit);

/// Both, for a finished run: the annotations on `out` (stderr: GitHub reads workflow commands
/// there as well, and stdout may carry a report), the md report appended to the file
/// GITHUB_STEP_SUMMARY names, when it names one. A summary that cannot be written is a warning.
void write_github_output(const report::case_source& cases, const schedule::run_report& report,
                         const aggregate::summary& s, console& out, const env_reader& env);

}  // namespace mira::cli
