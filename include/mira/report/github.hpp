// GitHub Actions' workflow commands for a finished run: an error annotation for each failed or
// errored case, so the job's page says which cases failed and why without opening the log.
#pragma once

#include <mira/report/render.hpp>

#include <cstddef>

namespace mira::report {

/// GitHub shows at most 10 error annotations of a step (and 10 warnings); more are dropped
/// without a word (actions/toolkit, docs/problem-matchers.md).
inline constexpr std::size_t github_error_annotations = 10;

/// One `error` workflow command per failed or errored case of `cases`, in order, the first
/// github_error_annotations of them (titled with the case's key and status; the message is
/// failure_reason(), else the status), then, when some were left out, one `warning` command
/// counting them: a warning, so that GitHub shows it. Every value is escaped as the runner
/// requires (github_property, github_data).
void github_annotations(const case_source& cases, const text_sink& out);

}  // namespace mira::report
