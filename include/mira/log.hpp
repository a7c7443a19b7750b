// A pluggable log sink: the library never writes to stderr itself. The host's diagnostics, the
// lines its study writes on stderr (unless host_options::on_stderr_line takes them) and the
// server's (serve::server_config::log) go to a sink, so a service can route them into its own
// logging; stderr_log_sink, the default, writes them to stderr.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mira {

enum class log_level { debug, info, warning, error };

std::string_view to_string(log_level l);

/// Whose words a record carries: the host's own diagnostics, or one line the study wrote on its
/// stderr (level info, the line in `message`, as written).
enum class log_source { host, study_stderr };

struct log_record {
  log_level level = log_level::info;
  std::string_view message;
  std::string_view study;                  // the study's name, once initialize told it
  std::optional<std::int64_t> request_id;  // the request this is about, if any
  std::string_view method;                 // its method, if any
  std::string_view excerpt;                // printable excerpt of offending input, if any
  log_source source = log_source::host;
};

using log_sink = std::function<void(const log_record&)>;

/// Writes the host's records at or above `min` to stderr as one line each ("mira: warning:
/// ..."), and every line of the study's stderr, whatever `min`, as "[<study_label>] <line>" (a
/// pool labels each process's lines "study N").
log_sink stderr_log_sink(log_level min = log_level::warning, std::string study_label = "study");

}  // namespace mira
