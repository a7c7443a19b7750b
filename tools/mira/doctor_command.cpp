// `mira doctor [--fix]`: mira.toml, the study's listing and the results dir checked by the
// library (mira/config/doctor.hpp) and printed per section. --fix creates what is missing (the
// results dir, a starter mira.toml) and rebuilds a run's unreadable meta.json from its case
// records (store::rebuild_meta: the damaged file kept beside it); it never removes a file.
#include "commands.hpp"
#include "config_step.hpp"
#include "console.hpp"
#include "help.hpp"

#include <mira/config/doctor.hpp>
#include <mira/store/files.hpp>
#include <mira/store/merge.hpp>
#include <mira/store/run_store.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace mira::cli {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using config::finding;
using config::severity;

namespace {

struct tally {
  std::size_t warnings = 0, errors = 0;

  void section(const std::string& title, const std::vector<finding>& findings) {
    std::printf("%s\n", printable(title).c_str());
    if (findings.empty()) std::printf("  ok: no problems found\n");
    for (auto& f : findings) {
      const bool error = f.level == severity::error;
      (error ? errors : warnings) += 1;
      std::printf("  %s: %s\n", error ? "error" : "warning", printable(f.message).c_str());
    }
  }
};

// Writes `text` to a new file at `path`; an existing file is left alone (O_EXCL).
bool create_new_file(const fs::path& path, const std::string& text, std::string& why) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    why = std::strerror(errno);
    return false;
  }
  std::size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why = std::strerror(errno);
      ::close(fd);
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {
    why = std::strerror(errno);
    return false;
  }
  return true;
}

// --fix for each run folder of `results` whose meta.json cannot be read: rebuilt from its case
// records, under the run's lock. Says what it did for each; false when one could not be fixed.
bool rebuild_damaged_meta(const fs::path& results) {
  bool ok = true;
  std::error_code ec;
  std::vector<std::string> ids;
  for (auto it = fs::directory_iterator(results, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    auto id = it->path().filename().string();
    std::error_code e;
    if (it->is_directory(e) && fs::exists(it->path() / "meta.json", e) &&
        !store::invalid_run_id(id) && !store::load_run_meta(results, id))
      ids.push_back(std::move(id));
  }
  std::sort(ids.begin(), ids.end());
  for (auto& id : ids) {
    auto done = store::rebuild_meta(results, id);
    if (!done) {
      std::printf("could not fix run %s: %s\n", printable(id).c_str(),
                  printable(done.error().message()).c_str());
      ok = false;
      continue;
    }
    std::printf(
        "fixed: run %s: meta.json rebuilt from %zu case record(s) (%s layout); the damaged one "
        "kept as %s (no record changed; the study, sessions and fingerprints it held are not "
        "in the new one)\n",
        printable(id).c_str(), done->records,
        std::string(store::to_string(done->records_layout)).c_str(),
        printable(done->damaged.string()).c_str());
    for (auto& u : done->unreadable)
      std::printf("  note: cannot read %s (left as it is, not counted)\n", printable(u).c_str());
  }
  return ok;
}

}  // namespace

int cmd_doctor(const std::vector<std::string>& args) {
  auto a = parse_args(command::doctor, args);
  if (a.help) return std::fputs(command_help(command::doctor).c_str(), stdout), exit_ok;
  tally t;
  bool fix_failed = false;
  std::error_code ec;
  const auto cwd = fs::current_path(ec);

  // mira.toml.
  config::config c;
  auto file = config::find_config(cwd);
  std::vector<finding> config_findings;
  if (!file && a.init) {
    auto path = cwd / "mira.toml";
    std::string why;
    if (create_new_file(path, config::starter_config(), why)) {
      std::printf("fixed: created %s (a starter: edit it)\n", printable(path.string()).c_str());
      file = path;
    } else {
      std::printf("could not create %s: %s\n", printable(path.string()).c_str(), why.c_str());
      fix_failed = true;
    }
  }
  if (!file) {
    config_findings.push_back({severity::warning, "no mira.toml in " + cwd.string() +
                                                      " or above (--init writes a starter)"});
  } else if (auto loaded = config::load_config(*file); !loaded) {
    config_findings.push_back({severity::error, loaded.error().to_string()});
  } else {
    c = std::move(*loaded);
    config_findings = config::check_config(c, config::system_probe::real());
  }
  t.section("mira.toml" + (file ? ": " + file->string() : std::string()), config_findings);

  // The study.
  auto launch = config::resolve_launch(a.launch, c, config::system_probe::real());
  if (!launch && launch.error().code == config::errc::no_study) {
    std::printf(
        "study\n  note: no study given (--study PATH, -- CMD, --launcher NAME or "
        "default_launcher): its checks are left out\n");
  } else {
    std::vector<finding> study_findings;
    std::string title = "study";
    if (!launch) {
      study_findings.push_back({severity::error, launch.error().message()});
    } else {
      a.study = launch->argv;
      for (auto& w : a.study) title += " " + w;
      std::fflush(stdout);
      bool listed = false;
      run_io([&](int& rc) -> asio::awaitable<void> {
        console out;
        auto study = co_await start_listed_study(a, out);
        if (!study) co_return;
        listed = true;
        study_findings = config::check_listing(study->listing, c);
        co_await study->connection.shutdown();
        rc = exit_ok;
      });
      if (!listed)
        study_findings.push_back(
            {severity::error, "the study did not start, initialize or list (see above)"});
    }
    t.section(title, study_findings);
  }

  // The results dir.
  fs::path results = a.results_dir_given ? fs::path(a.results_dir) : c.results_dir;
  if (a.fix && !fs::exists(results, ec)) {
    if (fs::create_directories(results, ec))
      std::printf("fixed: created %s\n", printable(results.string()).c_str());
    else {
      std::printf("could not create %s: %s\n", printable(results.string()).c_str(),
                  ec.message().c_str());
      fix_failed = true;
    }
  }
  if (a.fix && fs::is_directory(results, ec) && !rebuild_damaged_meta(results)) fix_failed = true;
  if (a.fix)
    for (auto& left : store::abandoned_merges(results, true))
      std::printf("fixed: removed %s, left by a killed merge\n", printable(left.string()).c_str());
  t.section("results dir: " + results.string(), config::check_results_dir(results));

  std::printf("summary: %zu warning(s), %zu error(s)\n", t.warnings, t.errors);
  return t.errors > 0 || fix_failed ? exit_failed : exit_ok;
}

}  // namespace mira::cli
