// GitHub Actions output of `mira run` and `mira score` (see github_output.hpp).
#include "github_output.hpp"

#include <mira/report/github.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mira::cli {

namespace {

// Writes all of `text` to `fd`, through short writes and signals.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    auto n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

bool github_output_on(const run_args& a, const env_reader& env) {
  const char* actions = env("GITHUB_ACTIONS");
  return a.github && actions && std::string_view(actions) == "true";
}

std::optional<std::string> append_step_summary(const std::filesystem::path& path,
                                               std::string_view markdown, std::size_t limit) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot open " + path.string() + ": " + std::strerror(errno);
  struct stat st {};
  std::size_t used = ::fstat(fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
  // The report's heading must start a line of its own, whatever ends what is there.
  const std::string_view lead = used > 0 ? "\n" : "";
  std::size_t room = used + lead.size() < limit ? limit - used - lead.size() : 0;
  std::string note;
  std::optional<std::string> said;
  if (markdown.size() > room) {
    note = "\n_The summary stops here: GitHub takes at most " + std::to_string(limit / 1024) +
           " KiB a step. The run's report.html and `mira report` show every case._\n";
    if (room <= note.size()) {
      ::close(fd);
      return "the step summary " + path.string() + " is full (GitHub takes at most " +
             std::to_string(limit / 1024) + " KiB a step): the report was not added";
    }
    // Whole lines only: a table row cut in two would garble what follows.
    auto cut = markdown.substr(0, room - note.size()).rfind('\n');
    markdown = markdown.substr(0, cut == std::string_view::npos ? 0 : cut + 1);
    said = "the report in the step summary " + path.string() + " was cut to GitHub's " +
           std::to_string(limit / 1024) + " KiB a step";
  }
  bool ok = write_all(fd, lead) && write_all(fd, markdown) && write_all(fd, note);
  int err = errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (!ok) return "cannot write the step summary " + path.string() + ": " + std::strerror(err);
  return said;
}

void write_github_output(const report::case_source& cases, const schedule::run_report& report,
                         const aggregate::summary& s, console& out, const env_reader& env) {
  report::github_annotations(cases, [&](std::string_view line) {
    out.line(std::string(line.substr(0, line.find_last_not_of('\n') + 1)));
  });
  const char* summary = env("GITHUB_STEP_SUMMARY");
  if (!summary || !*summary) return;
  std::string md;
  report::render("md", cases, report, s, [&](std::string_view piece) { md.append(piece); });
  if (auto problem = append_step_summary(summary, md))
    out.line("mira: warning: " + printable(*problem));
}

}  // namespace mira::cli
