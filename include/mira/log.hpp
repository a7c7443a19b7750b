// A pluggable log sink: the host never writes diagnostics straight to stderr, so a service can
// route them into its own logging.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace mira {

enum class log_level { debug, info, warning, error };

std::string_view to_string(log_level l);

struct log_record {
  log_level level = log_level::info;
  std::string_view message;
  std::string_view study;                  // the study's name, once initialize told it
  std::optional<std::int64_t> request_id;  // the request this is about, if any
  std::string_view method;                 // its method, if any
  std::string_view excerpt;                // printable excerpt of offending input, if any
};

using log_sink = std::function<void(const log_record&)>;

/// Writes records at or above `min` to stderr as one line each: "mira: warning: ...".
log_sink stderr_log_sink(log_level min = log_level::warning);

}  // namespace mira
