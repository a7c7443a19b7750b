// Merging shard runs (see merge.hpp): check every input, then write the merged folder under a
// temporary name in the results directory and rename it into place, so a failure or a refusal
// leaves nothing behind.
#include <mira/store/merge.hpp>

#include <mira/aggregate/summary.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/store/files.hpp>
#include <mira/store/run_store.hpp>
#include <mira/store/summary_feed.hpp>
#include "plan/natural_order.hpp"
#include "store/file_helpers.hpp"
#include "store/plan_keys.hpp"
#include "store/run_reader_access.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>

namespace mira::store {

namespace fs = std::filesystem;
namespace json = boost::json;
using boost::system::error_code;

namespace {

constexpr char merging_prefix[] = ".merging-";

struct input {
  fs::path folder;
  run_reader run;  // its keys; the records are read while they are copied
  shard_info shard;
};

template <class Code>
error merge_failure(Code code, std::string message) {
  return error{make_error_code(code), std::move(message)};
}

template <class Code>
tl::unexpected<error> refuse(Code code, std::string message) {
  return tl::make_unexpected(merge_failure(code, std::move(message)));
}

std::string indexes_text(const std::vector<std::size_t>& v) {
  std::string out;
  for (auto i : v) out += (out.empty() ? "" : ", ") + std::to_string(i);
  return out;
}

// Reads and checks one input on its own.
tl::expected<input, error> read_input(const fs::path& folder) {
  auto name = folder.filename().string();
  auto run = run_reader::open(folder.parent_path(), name);
  if (!run) return tl::make_unexpected(run.error());
  if (!run->unreadable().empty())
    return refuse(errc::corrupt,
                  "run " + folder.string() + ": " + std::to_string(run->unreadable().size()) +
                      " saved result(s) cannot be read, the first: " + run->unreadable().front());
  auto shard = shard_of(run->meta());
  if (!shard) return tl::make_unexpected(shard.error());
  if (!*shard)
    return refuse(
        merge_errc::not_a_shard,
        "run " + folder.string() + " is not a shard run (its meta.json has no \"shard\")");
  return input{folder, std::move(*run), **shard};
}

// The inputs against each other: one study, one plan, one count, each index and case once.
std::optional<error> check_together(const std::vector<input>& in) {
  auto& first = in.front();
  auto label = [](const input& i) {
    return "run " + i.folder.string() + " (shard " + plan::to_string(i.shard.spec) + ")";
  };
  std::map<std::size_t, const input*> by_index;
  for (auto& i : in) {
    auto &meta = i.run.meta(), &first_meta = first.run.meta();
    if (meta.study != first_meta.study || meta.study_version != first_meta.study_version)
      return merge_failure(merge_errc::mismatched, label(i) + " was made by study '" + meta.study +
                                                       "' version " + meta.study_version + ", " +
                                                       label(first) + " by '" + first_meta.study +
                                                       "' version " + first_meta.study_version);
    if (i.shard.spec.count != first.shard.spec.count)
      return merge_failure(merge_errc::mismatched, label(i) + " and " + label(first) +
                                                       " split the plan into different counts");
    if (i.shard.fingerprint != first.shard.fingerprint)
      return merge_failure(merge_errc::mismatched,
                           label(i) + " comes from another plan than " + label(first) +
                               " (plan fingerprints " + i.shard.fingerprint.substr(0, 12) +
                               "… and " + first.shard.fingerprint.substr(0, 12) +
                               "…: another selection or listing)");
    auto [it, fresh] = by_index.emplace(i.shard.spec.index, &i);
    if (!fresh)
      return merge_failure(merge_errc::duplicate,
                           "shard " + std::to_string(i.shard.spec.index) + " is given twice: run " +
                               it->second->folder.string() + " and run " + i.folder.string());
  }
  // Each input's keys are in natural order: walked together, a key in two inputs meets itself.
  std::vector<std::size_t> next(in.size(), 0);
  std::string_view last_key;
  const input* last_owner = nullptr;
  for (;;) {
    const input* least = nullptr;
    std::size_t least_at = 0;
    for (std::size_t k = 0; k < in.size(); ++k)
      if (next[k] < in[k].run.size() &&
          (!least || plan::natural_less(in[k].run.key(next[k]), least->run.key(next[least_at]))))
        least = &in[k], least_at = k;
    if (!least) return std::nullopt;
    auto key = least->run.key(next[least_at]++);
    if (last_owner && key == last_key && last_owner != least)
      return merge_failure(
          merge_errc::duplicate,
          "case " + std::string(key) + " is in " + label(*last_owner) + " and in " + label(*least));
    last_key = key;
    last_owner = least;
  }
}

error_code errno_code() {
  return {errno, boost::system::system_category()};
}

// Appends `header` and then the whole file `from` (when it exists) to `to`, made durable.
error_code append_copy(const fs::path& from, const fs::path& to, std::string_view header) {
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (out < 0) return errno_code();
  auto ec = detail::write_all(out, header);
  int src = ec ? -1 : ::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (src >= 0) {
    std::string buf(std::size_t{1} << 20, '\0');
    for (;;) {
      auto n = ::read(src, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ec = errno_code();
      if (n <= 0 || ec) break;
      if ((ec = detail::write_all(out, std::string_view(buf.data(), static_cast<std::size_t>(n)))))
        break;
    }
    ::close(src);
  }
  if (!ec && ::fsync(out) != 0) ec = errno_code();
  ::close(out);
  return ec;
}

merged_shard timing_of(const input& i) {
  merged_shard s;
  s.index = i.shard.spec.index;
  s.run_id = i.run.meta().run_id;
  s.cases = i.run.size();
  s.seconds = i.run.meta().seconds();
  auto& sessions = i.run.meta().sessions;
  if (!sessions.empty()) {
    s.started = sessions.front().started;
    s.finished = sessions.back().finished;
  }
  for (auto& session : sessions)
    if (std::find(s.hostnames.begin(), s.hostnames.end(), session.hostname) == s.hostnames.end())
      s.hostnames.push_back(session.hostname);
  return s;
}

// The merged run's plan is the union of the shards' (each one's last session's): its keys, when
// every shard is there with its own, so that a reader of the merged run can name what it lacks.
plan_keys merged_plan_keys(const std::vector<input>& in, const merged_info& info) {
  std::size_t planned = 0;
  for (auto& i : in) {
    if (!i.run.missing()) return {};  // a shard without its keys (an older host's)
    planned += i.run.meta().sessions.back().planned;
  }
  if (!info.missing.empty() || planned != info.plan_cases) return {};
  return [&in](const std::function<void(std::string_view)>& key) {
    // Read when the run was opened: a file changed since leaves the merged run a count of keys
    // that is not its plan's, and readers then only count its missing cases.
    for (auto& i : in) (void)detail::read_plan_keys(i.folder, i.run.meta(), key);
  };
}

// The merged run's meta.json, as far as the inputs make it: the first shard's study and
// environment, and each shard's sessions, so the run's duration is the run time of every shard.
void copy_meta(run_meta& meta, const std::vector<input>& in, const merged_info& info,
               const std::string& run_id) {
  auto& first = in.front().run.meta();
  meta.run_id = run_id;
  meta.study = first.study;
  meta.study_version = first.study_version;
  meta.initialize = first.initialize;
  meta.study_command = first.study_command;
  meta.study_env = first.study_env;
  meta.host = first.host;
  meta.environment = first.environment;
  meta.fingerprints = first.fingerprints;
  meta.extra["merged"] = info.to_json();
  for (auto& i : in)
    for (auto& s : i.run.meta().sessions) {
      if (meta.started.empty() || (!s.started.empty() && s.started < meta.started))
        meta.started = s.started;
      meta.sessions.push_back(s);
    }
}

// The merge itself is the merged run's last session: it ran nothing. It says what the merged
// run planned and how it stands: a shard that stopped leaves it stopped.
session_entry merge_session(const std::vector<input>& in, const merged_info& info,
                            const merge_options& options) {
  session_entry merge;
  merge.argv = options.argv;
  merge.config = json::object{{"merge", info.to_json()}};
  merge.planned = info.plan_cases;
  for (auto& i : in) {
    merge.reused += i.run.size();
    auto& last = i.run.meta().sessions;
    if (merge.stopped.empty() && !last.empty() && !last.back().stopped.empty()) {
      merge.stopped = last.back().stopped;
      merge.stop_message =
          "shard " + std::to_string(i.shard.spec.index) + " (run " + i.run.meta().run_id + "): " +
          (last.back().stop_message.empty() ? last.back().stopped : last.back().stop_message);
    }
  }
  return merge;
}

// Each shard's events and study stderr, one after the other, each behind a marker naming it.
std::optional<std::string> copy_logs(const std::vector<input>& in, const fs::path& to) {
  for (auto& i : in) {
    auto& id = i.run.meta().run_id;
    auto label = "shard " + std::to_string(i.shard.spec.index) + " (run " + id + ")";
    auto marker =
        protocol::to_json_text(json::object{{"shard", i.shard.spec.index}, {"run_id", id}}) + "\n";
    if (auto ec = append_copy(i.folder / "events.ndjson", to / "events.ndjson", marker))
      return write_error{ec, to / "events.ndjson"}.message();
    if (auto ec = append_copy(i.folder / "study.stderr.log", to / "study.stderr.log",
                              "--- " + label + " ---\n"))
      return write_error{ec, to / "study.stderr.log"}.message();
  }
  return std::nullopt;
}

// Every shard's case records, through the merged run's writer. Returns how many were copied.
tl::expected<std::size_t, std::string> copy_records(const std::vector<input>& in,
                                                    run_store::case_writer& writer) {
  std::mutex m;
  std::optional<std::string> failed;
  std::size_t copied = 0;
  for (auto& i : in) {
    auto late = i.run.visit([&](std::size_t, const saved_case& c) {
      writer.submit(c.key, protocol::to_json_text(c.record), [&, key = c.key](error_code ec) {
        std::lock_guard lock(m);
        if (ec && !failed)
          failed = "cannot save the record of " + key + " to " + writer.file_of(key).string() +
                   ": " + ec.message();
      });
      ++copied;
      return true;
    });
    if (!late.empty()) {
      writer.drain();
      return tl::make_unexpected("run " + i.folder.string() + ": " + late.front() +
                                 " (it could be read when the merge began)");
    }
  }
  writer.drain();
  if (failed) return tl::make_unexpected(*failed);
  return copied;
}

// The summary and the report files over the merged run as written, read back a case at a time,
// and the end of the merge's session.
std::optional<std::string> finish_merged(run_store& store, const merged_info& info,
                                         const merge_options& options, const std::string& run_id,
                                         std::size_t copied) {
  auto& meta = store.meta();
  auto merged = detail::run_reader_access::open_folder(store.path(), meta, nullptr);
  if (!merged.unreadable().empty())
    return "the merged run cannot be read back: " + merged.unreadable().front();
  summary_feed feed;
  auto late = merged.visit_cases(
      [&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
        feed.add(c, r);
        return true;
      });
  if (!late.empty()) return "the merged run cannot be read back: " + late.front();
  auto summary = feed.finish();
  schedule::run_report report;
  report.seconds = store.seconds();
  report.run_id = run_id;
  report.study = meta.study;
  report.started = meta.started;
  if (auto& merge_session = store.session(); !merge_session.stopped.empty()) {
    report.stopped = schedule::stop_reason_from_label(merge_session.stopped);
    report.stop_message = merge_session.stop_message;
  }
  if (info.plan_cases > copied) count_unfinished(summary, info.plan_cases - copied);
  std::vector<report_file> files;
  if (options.report_files) files = options.report_files(merged, report, summary);
  if (auto e = store.finish(files, aggregate::summary_json(summary, report)))
    return "cannot finish the merged run: " + e.message();
  return std::nullopt;
}

// Writes the merged run into `tmp_id` under the results directory.
tl::expected<std::size_t, std::string> write_merged(const std::vector<input>& in,
                                                    const merged_info& info,
                                                    const merge_options& options,
                                                    const std::string& tmp_id,
                                                    const std::string& run_id) {
  auto store = run_store::create(options.results_dir, tmp_id, in.front().run.meta().layout);
  if (!store) return tl::make_unexpected(store.error().message());
  copy_meta(store->meta(), in, info, run_id);
  if (auto e = store->begin_session(merge_session(in, info, options), merged_plan_keys(in, info)))
    return tl::make_unexpected(e.message());
  if (auto e = copy_logs(in, store->path())) return tl::make_unexpected(std::move(*e));
  auto writer = store->writer();
  if (!writer) return tl::make_unexpected(writer.error().message());
  auto copied = copy_records(in, **writer);
  if (!copied) return copied;
  if (auto e = finish_merged(*store, info, options, run_id, *copied))
    return tl::make_unexpected(std::move(*e));
  return copied;
}

}  // namespace

tl::expected<merge_outcome, error> merge_runs(const std::vector<fs::path>& inputs,
                                              const merge_options& options) {
  if (inputs.empty()) return refuse(merge_errc::no_inputs, "no runs to merge");
  std::vector<input> in;
  for (auto& folder : inputs) {
    auto i = read_input(folder);
    if (!i) return tl::make_unexpected(i.error());
    in.push_back(std::move(*i));
  }
  if (auto why = check_together(in)) return tl::make_unexpected(std::move(*why));
  std::sort(in.begin(), in.end(),
            [](const input& a, const input& b) { return a.shard.spec.index < b.shard.spec.index; });

  merge_outcome out;
  auto& info = out.info;
  const auto& shard0 = in.front().shard;
  info.count = shard0.spec.count;
  info.fingerprint = shard0.fingerprint;
  info.plan_cases = shard0.plan_cases;
  std::size_t merged = 0;
  for (std::size_t i = 0, next = 0; i < info.count; ++i) {
    if (next < in.size() && in[next].shard.spec.index == i) {
      auto& s = in[next++];
      info.shards.push_back(timing_of(s));
      merged += s.run.size();
      if (s.run.size() < s.shard.shard_cases)
        out.incomplete.push_back("shard " + std::to_string(i) + " (run " + s.folder.string() +
                                 "): saved " + std::to_string(s.run.size()) + " of " +
                                 std::to_string(s.shard.shard_cases) + " case(s)");
    } else {
      info.missing.push_back(i);
    }
  }
  info.not_run = info.plan_cases > merged ? info.plan_cases - merged : 0;
  if (!options.allow_partial) {
    std::string why;
    if (!info.missing.empty())
      why = "shard(s) " + indexes_text(info.missing) + " of " + std::to_string(info.count) +
            " are missing";
    for (auto& s : out.incomplete) why += (why.empty() ? "" : "; ") + s;
    if (!why.empty()) return refuse(merge_errc::incomplete, why);
  }

  out.run_id = options.run_id;
  if (out.run_id.empty()) {
    std::random_device rd;
    out.run_id =
        new_run_id(std::chrono::system_clock::now(), static_cast<std::uint16_t>(rd() & 0xffff));
  }
  if (auto why = invalid_run_id(out.run_id))
    return refuse(errc::invalid_id, "run id \"" + out.run_id + "\": " + *why);
  out.path = options.results_dir / out.run_id;
  std::error_code ec;
  if (fs::symlink_status(out.path, ec).type() != fs::file_type::not_found)
    return refuse(errc::exists, out.path.string() + " exists");

  (void)abandoned_merges(options.results_dir, true);
  std::random_device rd;
  char tmp[40];
  std::snprintf(tmp, sizeof tmp, "%s%08x%08x", merging_prefix, rd(), rd());
  auto written = write_merged(in, info, options, tmp, out.run_id);
  auto tmp_path = options.results_dir / tmp;
  if (!written) {
    fs::remove_all(tmp_path, ec);
    return refuse(merge_errc::cannot_write, written.error());
  }
  out.cases = *written;
  // No replacing: another process may have taken the id meanwhile.
  if (::renameat2(AT_FDCWD, tmp_path.c_str(), AT_FDCWD, out.path.c_str(), RENAME_NOREPLACE) != 0) {
    auto why = errno_code().message();
    fs::remove_all(tmp_path, ec);
    return refuse(merge_errc::cannot_write,
                  "cannot rename the merged run to " + out.path.string() + ": " + why);
  }
  // Best effort: the merged run is whole and in place; a crash before the directory's next sync
  // could lose only its name, and its inputs are untouched.
  (void)detail::sync_directory(options.results_dir);
  return out;
}

std::vector<fs::path> abandoned_merges(const fs::path& results_dir, bool remove) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(results_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(merging_prefix, 0) != 0) continue;
    // A merge under way holds its folder's lock (run_store's flock on the folder itself).
    int fd = ::open(it->path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code failed;
      if (remove) fs::remove_all(it->path(), failed);
      if (!failed) out.push_back(it->path());
    }
    ::close(fd);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

class merge_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.store.merge"; }
  std::string message(int e) const override {
    switch (static_cast<merge_errc>(e)) {
      case merge_errc::no_inputs:
        return "no runs to merge";
      case merge_errc::not_a_shard:
        return "not a shard run";
      case merge_errc::mismatched:
        return "the runs are not shards of one plan";
      case merge_errc::duplicate:
        return "a shard or a case is given twice";
      case merge_errc::incomplete:
        return "shards are missing or unfinished";
      case merge_errc::cannot_write:
        return "the merged run cannot be written";
    }
    return "unknown merge error";
  }
};

}  // namespace

const boost::system::error_category& merge_category() noexcept {
  static const merge_category_impl c;
  return c;
}

boost::system::error_code make_error_code(merge_errc e) noexcept {
  return {static_cast<int>(e), merge_category()};
}

}  // namespace mira::store
