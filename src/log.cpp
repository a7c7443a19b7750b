// The default log sink: the one place the library writes to stderr, when a program asks it to.
#include <mira/log.hpp>

#include <cstdio>
#include <string>

namespace mira {

std::string_view to_string(log_level l) {
  switch (l) {
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warning:
      return "warning";
    case log_level::error:
      return "error";
  }
  return "?";
}

log_sink stderr_log_sink(log_level min, std::string study_label) {
  return [min, label = std::move(study_label)](const log_record& r) {
    if (r.source == log_source::study_stderr) {
      std::string line = "[" + label + "] ";
      line += r.message;
      line += '\n';
      std::fwrite(line.data(), 1, line.size(), stderr);
      return;
    }
    if (r.level < min) return;
    std::string line = "mira: ";
    line += to_string(r.level);
    line += ": ";
    if (!r.study.empty()) {
      line += '[';
      line += r.study;
      line += "] ";
    }
    line += r.message;
    if (r.request_id) line += " (request " + std::to_string(*r.request_id) + ")";
    if (!r.excerpt.empty()) {
      line += ": ";
      line += r.excerpt;
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
  };
}

}  // namespace mira
