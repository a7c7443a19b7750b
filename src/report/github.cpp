// GitHub Actions' annotations of a finished run (see github.hpp).
#include <mira/report/github.hpp>

#include <mira/report/escape.hpp>

#include <string>

namespace mira::report {

using schedule::case_state;

void github_annotations(const case_source& cases, const text_sink& out) {
  std::size_t shown = 0, left_out = 0;
  cases.visit([&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
    if (r.state != case_state::failed && r.state != case_state::error) return true;
    if (shown == github_error_annotations) {
      ++left_out;
      return true;
    }
    ++shown;
    const std::string status(to_string(r.state));
    auto why = failure_reason(r);
    out("::error title=" + github_property(c.key + " " + status) +
        "::" + github_data(why.empty() ? status : why) + "\n");
    return true;
  });
  if (left_out > 0)
    out("::warning title=mira::" + std::to_string(left_out) +
        " more failed or errored case(s), not annotated: GitHub shows " +
        std::to_string(github_error_annotations) + " error annotations a step. The report lists " +
        "them all.\n");
}

}  // namespace mira::report
