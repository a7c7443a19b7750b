// The run store (see run_store.hpp).
#include <mira/store/run_store.hpp>

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/store/files.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/version.hpp>
#include "store/batch_writer.hpp"
#include "store/case_index.hpp"
#include "store/case_journal.hpp"
#include "store/digest.hpp"
#include "store/file_helpers.hpp"
#include "store/key_index.hpp"
#include "store/plan_keys.hpp"
#include "store/run_folder.hpp"
#include "store/run_reader_access.hpp"
#include "store/segment_log.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace mira::store {

namespace fs = std::filesystem;
namespace json = boost::json;
using boost::system::error_code;
using schedule::case_state;

namespace {

error_code errno_code() {
  return {errno, boost::system::system_category()};
}

tl::unexpected<error> fail(errc e, std::string text) {
  return tl::make_unexpected(error{make_error_code(e), std::move(text)});
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::optional<error> link_error(const fs::path& path) {
  return error{make_error_code(errc::corrupt), detail::open_failure(path, ELOOP)};
}

loaded_run load_folder(const fs::path& folder, run_meta meta,
                       std::unordered_map<std::string, fs::path>* dirs) {
  return detail::run_reader_access::open_folder(folder, std::move(meta), dirs).load();
}

tl::expected<run_meta, error> read_meta(const fs::path& folder, const std::string& id) {
  std::error_code ec;
  const auto status = fs::symlink_status(folder / "meta.json", ec);
  if (fs::is_symlink(status)) return tl::make_unexpected(*link_error(folder / "meta.json"));
  if (!fs::exists(status)) {
    // A run killed before its first meta.json was durable still has its cases.
    run_meta m;
    m.run_id = id;
    return m;
  }
  auto o = read_json_object(folder / "meta.json");
  if (!o) return fail(errc::corrupt, (folder / "meta.json").string() + ": not a JSON object");
  auto m = run_meta::from_json(*o);
  if (!m)
    return tl::make_unexpected(
        error{m.error().code, (folder / "meta.json").string() + ": " + m.error().message()});
  if (m->run_id.empty()) m->run_id = id;
  return std::move(*m);
}

tl::expected<fs::path, error> existing_run(const fs::path& results_dir, const std::string& run_id) {
  if (auto why = invalid_run_id(run_id))
    return fail(errc::invalid_id, "run id \"" + run_id + "\": " + *why);
  auto path = results_dir / run_id;
  std::error_code ec;
  if (!fs::is_directory(path / "cases", ec) && !fs::is_directory(path / "segments", ec) &&
      !fs::exists(path / "meta.json", ec))
    return fail(errc::not_found, "no saved run \"" + run_id + "\" in " + results_dir.string());
  return path;
}

// The names a run folder holds whose kind the store knows. A symbolic link in their place would
// make the store read or write outside the folder (a resume appending to a linked segment, a
// .lock's target truncated), so a writer refuses the run instead.
constexpr const char* run_files[] = {".lock",
                                     "meta.json",
                                     "meta.json.damaged",
                                     "cases",
                                     "segments",
                                     "events.ndjson",
                                     "study.stderr.log",
                                     "report.json",
                                     "report.html",
                                     detail::plan_keys_file,
                                     detail::case_index_name.data(),
                                     detail::case_journal_name.data()};

// The first symbolic link among the run folder's own files and the entries of its record folders
// (a case's folder, a segment), or nothing. One pass over the names: a directory's entries say
// their type, so no file is opened.
std::optional<error> find_link(int dir, const fs::path& folder) {
  for (const char* name : run_files) {
    struct stat st {};
    if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
      return link_error(folder / name);
  }
  for (const char* records : {"cases", "segments"}) {
    int fd = ::openat(dir, records, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;  // absent (the other layout), or not a folder: the readers say so
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      continue;
    }
    std::optional<error> found;
    while (auto* e = ::readdir(d)) {
      bool link = e->d_type == DT_LNK;
      struct stat st {};
      if (e->d_type == DT_UNKNOWN)
        link = ::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
      if (link) {
        found = link_error(folder / records / e->d_name);
        break;
      }
    }
    ::closedir(d);
    if (found) return found;
  }
  return std::nullopt;
}

// An exclusive flock on the run folder itself for as long as the store lives: it holds for as
// long as the folder exists, whatever happens to the files in it (a lock on a file inside was
// lost when someone deleted that file, and a second writer got in). The kernel drops it when
// the process dies, so a killed host leaves no stale lock. <run>/.lock is locked as well and
// names the holder for the message another process prints. Taking it refuses a run folder
// holding a symbolic link where the store keeps a file or folder (find_link).
class folder_lock {
 public:
  static tl::expected<folder_lock, error> take(const fs::path& folder) {
    const auto file = folder / ".lock";
    int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
      return fail(errc::io, "cannot open " + folder.string() + ": " + errno_code().message());
    auto in_use = [&] {
      auto holder = holder_text(dir);
      ::close(dir);
      return fail(errc::in_use, "run " + folder.filename().string() + " is in use by " +
                                    (holder.empty() ? std::string("another process") : holder) +
                                    " (it holds a lock on " + folder.string() + ")");
    };
    // A file system that locks no directory (NFS emulates flock with a write lock, which a
    // directory cannot take): .lock alone holds the run there.
    bool dir_locked = true;
    if (::flock(dir, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) return in_use();
      dir_locked = false;
    }
    // .lock too: a host of an earlier version locks only it, and a file's lock reaches the
    // server on network file systems where a directory's may stay local to one node.
    int text = ::openat(dir, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    int err = errno;
    if (text < 0 && err == ELOOP) {
      ::close(dir);
      return tl::make_unexpected(*link_error(file));
    }
    if (text >= 0 && ::flock(text, LOCK_EX | LOCK_NB) != 0) {
      err = errno;
      ::close(text);
      text = -1;
      if (err == EWOULDBLOCK) return in_use();
    }
    if (!dir_locked && text < 0) {
      ::close(dir);
      return fail(errc::io, "cannot lock " + folder.string() + " or " + file.string() + ": " +
                                std::strerror(err));
    }
    folder_lock lock(dir, dir_locked, text);
    if (auto link = find_link(dir, folder)) return tl::make_unexpected(std::move(*link));
    // The locks hold whether or not the text can be written: it only serves the message.
    if (text >= 0) {
      auto me = "pid " + std::to_string(::getpid()) + " on host " + hostname() + "\n";
      if (::ftruncate(text, 0) == 0) (void)detail::write_all(text, me);
    }
    return lock;
  }
  folder_lock(folder_lock&& o) noexcept
      : dir_(std::exchange(o.dir_, -1)), text_(std::exchange(o.text_, -1)) {}
  folder_lock& operator=(folder_lock&& o) noexcept {
    std::swap(dir_, o.dir_);
    std::swap(text_, o.text_);
    return *this;
  }
  ~folder_lock() {
    if (text_ >= 0) ::close(text_);
    if (dir_ >= 0) ::close(dir_);
  }

 private:
  // `dir` is kept open while it holds the lock; else it is closed here.
  folder_lock(int dir, bool dir_locked, int text) : dir_(dir), text_(text) {
    if (!dir_locked) ::close(std::exchange(dir_, -1));
  }

  static std::string holder_text(int dir) {
    char buf[256] = {};
    std::string holder;
    int fd = ::openat(dir, ".lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return holder;
    auto n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (n > 0) holder.assign(buf, static_cast<std::size_t>(n));
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return holder;
  }

  int dir_ = -1;
  int text_ = -1;  // .lock, when it could be opened and locked
};

// Appends to one file (created when missing), O_APPEND so earlier sessions' text is never
// touched, and never through a link. A file that does not end its last line (a host killed
// mid-write, a study whose last stderr line had no end) gets one first, so what follows starts
// on a line of its own.
write_error append_file(const fs::path& path, std::string_view text) {
  if (text.empty()) return {};
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return {errno_code(), path};
  boost::system::error_code ec;
  struct stat st {};
  char last = '\n';
  if (::fstat(fd, &st) != 0 || (st.st_size > 0 && ::pread(fd, &last, 1, st.st_size - 1) != 1))
    ec = errno_code();
  if (!ec && last != '\n') ec = detail::write_all(fd, "\n");
  if (!ec) ec = detail::write_all(fd, text);
  if (::close(fd) != 0 && !ec) ec = errno_code();
  return {ec, path};
}

class per_case_writer final : public run_store::case_writer {
 public:
  per_case_writer(fs::path folder, const std::unordered_map<std::string, fs::path>* dirs)
      : folder_(std::move(folder)), dirs_(dirs), writer_(folder_) {}
  void submit(const std::string& key, std::string record, done_fn done) override {
    record += '\n';
    writer_.submit(file_of(key), std::move(record), std::move(done));
  }
  // A file per record, as submit() writes it; the batch is reported when its last file is.
  void submit_batch(case_batch batch, batch_done_fn done) override {
    if (batch.empty()) return done(std::move(batch), {});
    // Only the writer's thread touches it once the files are queued: the callbacks run there.
    struct pending {
      case_batch batch;
      batch_done_fn done;
      std::vector<save_failure> failed;
      std::size_t left;
    };
    const auto n = batch.size();
    auto state = std::make_shared<pending>(pending{std::move(batch), std::move(done), {}, n});
    for (std::size_t i = 0; i < n; ++i) {
      const std::string key(state->batch.key(i));
      auto file = file_of(key);
      std::string contents;
      contents.reserve(state->batch.record(i).size() + 1);
      (contents += state->batch.record(i)) += '\n';
      writer_.submit(file, std::move(contents), [state, i, file](boost::system::error_code ec) {
        if (ec) state->failed.push_back({std::string(state->batch.key(i)), file, ec, i});
        if (--state->left > 0) return;
        state->done(std::move(state->batch), std::move(state->failed));
      });
    }
  }
  void drain() override { writer_.drain(); }
  fs::path file_of(const std::string& key) const override {
    if (auto it = dirs_->find(key); it != dirs_->end()) return it->second / "result.json";
    return folder_ / "cases" / encode_key(key) / "result.json";
  }

 private:
  fs::path folder_;
  const std::unordered_map<std::string, fs::path>* dirs_;
  batch_writer writer_;
};

class compact_writer final : public run_store::case_writer {
 public:
  explicit compact_writer(std::unique_ptr<segment_writer> w) : writer_(std::move(w)) {}
  void submit(const std::string& key, std::string record, done_fn done) override {
    writer_->submit(key, std::move(record), std::move(done));
  }
  void submit_batch(case_batch batch, batch_done_fn done) override {
    if (batch.empty()) return done(std::move(batch), {});
    writer_->submit(
        std::move(batch), [w = writer_.get(), done = std::move(done)](case_batch& b, auto results) {
          std::vector<save_failure> failed;
          for (std::size_t i = 0; i < results.size(); ++i)
            if (results[i])
              failed.push_back({std::string(b.key(i)), w->current_segment(), results[i], i});
          done(std::move(b), std::move(failed));
        });
  }
  void drain() override { writer_->drain(); }
  fs::path file_of(const std::string&) const override { return writer_->current_segment(); }

 private:
  std::unique_ptr<segment_writer> writer_;
};

}  // namespace

std::pair<plan::plan, schedule::run_report> loaded_run::as_report() const {
  std::pair<plan::plan, schedule::run_report> out;
  auto& [p, report] = out;
  p.cases.reserve(cases.size());
  report.cases.reserve(cases.size());
  for (auto& c : cases) {
    p.cases.push_back(planned_case_of(c));
    report.cases.push_back(decode_case_record(c.record));
  }
  report.seconds = meta.seconds();
  return out;
}

tl::expected<loaded_run, error> load_run(const fs::path& results_dir, const std::string& run_id) {
  auto path = existing_run(results_dir, run_id);
  if (!path) return tl::make_unexpected(path.error());
  auto meta = read_meta(*path, run_id);
  if (!meta) return tl::make_unexpected(meta.error());
  return load_folder(*path, std::move(*meta), nullptr);
}

tl::expected<run_meta, error> load_run_meta(const fs::path& results_dir,
                                            const std::string& run_id) {
  auto path = existing_run(results_dir, run_id);
  if (!path) return tl::make_unexpected(path.error());
  return read_meta(*path, run_id);
}

std::optional<std::string> latest_run_id(const fs::path& results_dir) {
  std::optional<std::string> best;
  std::string best_started;
  fs::file_time_type best_written;
  std::error_code ec;
  for (fs::directory_iterator it(results_dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto id = it->path().filename().string();
    if (id.empty() || id.front() == '.' || invalid_run_id(id) || !it->is_directory(ec) ||
        !fs::is_regular_file(it->path() / "meta.json", ec))
      continue;
    auto meta = read_meta(it->path(), id);
    if (!meta) continue;
    std::string started = meta->sessions.empty() ? meta->started : meta->sessions.back().started;
    // Times are to the second: meta.json's own (written as a session begins and ends) breaks
    // a tie, e.g. a merge and its last shard.
    std::error_code unknown;  // a time it cannot read is the oldest
    auto written = fs::last_write_time(it->path() / "meta.json", unknown);
    if (!best || std::tie(started, written, id) > std::tie(best_started, best_written, *best)) {
      best = id;
      best_started = std::move(started);
      best_written = written;
    }
  }
  return best;
}

plan_keys keys_of(const plan::case_list& cases) {
  return [&cases](const std::function<void(std::string_view)>& key) {
    for (std::size_t i = 0; i < cases.size(); ++i) key(cases.key(i));
  };
}

json::object listing_fingerprints(const protocol::list_result& list) {
  json::object out;
  for (auto& e : list.evals) {
    // The canonical JSON of the eval's listing entry, hashed as it is made: its samples one at a
    // time (a million samples as one JSON value would cost hundreds of MB). `head` is every
    // member but the samples: a member eval_info gains is copied here too.
    protocol::eval_info head;
    head.name = e.name;
    head.description = e.description;
    head.next_cursor = e.next_cursor;
    head.scorers = e.scorers;
    head.targets = e.targets;
    head.axes = e.axes;
    head.max_turns = e.max_turns;
    head.trials = e.trials;
    head.seed = e.seed;
    head.metadata = e.metadata;
    sha256_stream digest;
    auto hash = [&digest](std::string_view piece) { digest.update(piece); };
    canonical_json_to(
        protocol::encode(head), "samples",
        [&e](const text_sink& sink) {
          sink("[");
          for (std::size_t i = 0; i < e.samples.size(); ++i) {
            if (i) sink(",");
            sink(canonical_json(json::value(protocol::encode(e.samples[i]))));
          }
          sink("]");
        },
        hash);
    out[e.name] = digest.hex_digest();
  }
  return out;
}

namespace {

// What a resume says about the saved run before it takes anything from it: another study
// (refused unless allowed), another study version or seed, evals changed since.
std::optional<error> check_saved(const run_meta& meta, const protocol::initialize_result& study,
                                 const json::object& fingerprints, std::optional<std::int64_t> seed,
                                 const resume_options& options, resume_plan& out) {
  const auto& id = meta.run_id;
  if (!meta.study.empty() && meta.study != study.study) {
    auto why =
        "run " + id + " was made by study '" + meta.study + "', this is '" + study.study + "'";
    if (!options.allow_other_study) return fail(errc::incompatible, why).value();
    out.warnings.push_back(why);
  }
  if (!meta.study_version.empty() && meta.study_version != study.study_version)
    out.warnings.push_back("run " + id + " was made by study version " + meta.study_version +
                           ", this is " + study.study_version);
  if (!meta.sessions.empty()) {
    auto& config = meta.sessions.back().config;
    auto* sel = config.if_contains("selection");
    auto* saved_seed = sel && sel->is_object() ? sel->get_object().if_contains("seed") : nullptr;
    auto now = seed ? json::value(*seed) : json::value(nullptr);
    if (saved_seed && *saved_seed != now)
      out.warnings.push_back("run " + id + " was made with --seed " +
                             protocol::to_json_text(*saved_seed) + ", this run uses " +
                             protocol::to_json_text(now) + ": saved trials keep their old seeds");
  }
  for (auto& [eval, hash] : fingerprints)
    if (auto* old = meta.fingerprints.if_contains(eval); old && *old != hash)
      out.warnings.push_back("eval '" + std::string(eval) + "' changed since run " + id +
                             " was saved");
  return std::nullopt;
}

bool run_again(case_state s, const resume_options& options) {
  return s == case_state::cancelled ||
         (options.retry_errors && (s == case_state::error || s == case_state::na)) ||
         (options.retry_failed && s == case_state::failed);
}

}  // namespace

tl::expected<resume_plan, error> plan_resume(const loaded_run& run, const plan::plan& p,
                                             const protocol::initialize_result& study,
                                             const json::object& fingerprints,
                                             std::optional<std::int64_t> seed,
                                             const resume_options& options) {
  resume_plan out;
  if (auto e = check_saved(run.meta, study, fingerprints, seed, options, out))
    return tl::unexpected(std::move(*e));

  std::unordered_map<std::string_view, const saved_case*> saved;
  saved.reserve(run.cases.size());
  for (auto& c : run.cases) saved.emplace(c.key, &c);
  std::unordered_set<std::string> planned;
  planned.reserve(p.cases.size());
  out.records.resize(p.cases.size());
  for (std::size_t i = 0; i < p.cases.size(); ++i) {
    auto key = p.cases.key(i);
    auto it = saved.find(key);
    planned.insert(std::move(key));
    if (it != saved.end()) {
      auto rec = decode_case_record(it->second->record);
      if (!run_again(rec.state, options)) {
        ++out.reused_states[static_cast<std::size_t>(rec.state)];
        out.records[i] = std::move(rec);
        ++out.reused;
        continue;
      }
    }
    out.todo.push_back(i);
  }
  for (auto& c : run.cases) {
    if (planned.count(c.key)) continue;
    out.outside.cases.push_back(planned_case_of(c));
    out.outside_records.push_back(decode_case_record(c.record));
  }
  return out;
}

tl::expected<resume_plan, error> plan_resume(const run_reader& run, const plan::plan& p,
                                             const protocol::initialize_result& study,
                                             const json::object& fingerprints,
                                             std::optional<std::int64_t> seed,
                                             const resume_options& options,
                                             const resume_sink& sink) {
  resume_plan out;
  if (auto e = check_saved(run.meta(), study, fingerprints, seed, options, out))
    return tl::unexpected(std::move(*e));
  // Each saved case's plan index, through its key (an index dropped once every planned key has
  // been looked up).
  constexpr auto none = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> plan_index(run.size(), none);
  {
    detail::key_index saved(run.size(), [&run](std::size_t r) { return run.key(r); });
    for (std::size_t i = 0; i < p.cases.size(); ++i)
      if (auto r = saved.find(p.cases.key(i))) plan_index[*r] = static_cast<std::uint32_t>(i);
  }
  std::vector<bool> reused(p.cases.size(), false);
  auto late = run.visit_cases(
      [&](std::size_t r, const plan::planned_case& c, const schedule::case_record& rec) {
        const auto i = plan_index[r];
        if (i == none) {
          out.outside.cases.push_back(c);
          if (sink.outside) sink.outside(c, rec);
        } else if (!run_again(rec.state, options)) {
          reused[i] = true;
          ++out.reused;
          ++out.reused_states[static_cast<std::size_t>(rec.state)];
          if (sink.reused) sink.reused(i, rec);
        }
        return true;
      });
  for (auto& u : late) out.warnings.push_back("cannot read " + u + "; that case runs again");
  for (std::size_t i = 0; i < p.cases.size(); ++i)
    if (!reused[i]) out.todo.push_back(i);
  return out;
}

std::optional<std::pair<plan::plan, schedule::run_report>> whole_run(
    const plan::plan& p, const schedule::run_report& report, const resume_plan& resumed) {
  if (resumed.outside.cases.empty()) return std::nullopt;
  std::pair<plan::plan, schedule::run_report> out;
  out.first.cases = p.cases;
  out.first.evals = p.evals;
  out.second = report;
  for (std::size_t i = 0; i < resumed.outside.cases.size(); ++i) {
    out.first.cases.push_back(resumed.outside.cases[i]);
    out.second.cases.push_back(resumed.outside_records[i]);
  }
  return out;
}

struct run_store::state {
  fs::path path;
  std::string id;
  run_meta meta;
  std::optional<folder_lock> lock;
  std::unordered_map<std::string, fs::path> dirs;  // keys saved under a foreign folder name
  std::string events;                              // not yet appended
};

run_store::run_store(std::unique_ptr<state> s) : s_(std::move(s)) {}
run_store::run_store(run_store&&) noexcept = default;
run_store& run_store::operator=(run_store&&) noexcept = default;
run_store::~run_store() {
  if (s_) flush_events();
}

tl::expected<run_store, error> run_store::create(const fs::path& results_dir,
                                                 const std::string& run_id, layout l) {
  if (auto why = invalid_run_id(run_id))
    return fail(errc::invalid_id, "run id \"" + run_id + "\": " + *why);
  std::error_code ec;
  fs::create_directories(results_dir, ec);
  if (ec) return fail(errc::io, "cannot create " + results_dir.string() + ": " + ec.message());
  auto path = results_dir / run_id;
  if (!fs::create_directory(path, ec) || ec)
    return fail(ec ? errc::io : errc::exists, "cannot create run folder " + path.string() + ": " +
                                                  (ec ? ec.message() : std::string("it exists")));
  // The folder's entry in results/ made durable: without it a crash could lose the whole run.
  if (auto e = detail::sync_directory(results_dir)) {
    ::rmdir(path.c_str());
    return fail(errc::io, "cannot sync " + results_dir.string() + ": " + e.message());
  }
  // The lock before anything is written in the folder.
  auto lock = folder_lock::take(path);
  if (!lock) {
    ::rmdir(path.c_str());  // made above, and still empty unless the lock's holder wrote in it
    return tl::make_unexpected(lock.error());
  }
  auto records = path / (l == layout::compact ? "segments" : "cases");
  fs::create_directory(records, ec);
  if (ec) return fail(errc::io, "cannot create " + records.string() + ": " + ec.message());
  auto s = std::make_unique<state>();
  s->path = std::move(path);
  s->id = run_id;
  s->meta.run_id = run_id;
  s->meta.layout = l;
  s->lock.emplace(std::move(*lock));
  return run_store(std::move(s));
}

tl::expected<run_store, error> run_store::open(const fs::path& results_dir,
                                               const std::string& run_id) {
  auto path = existing_run(results_dir, run_id);
  if (!path) return tl::make_unexpected(path.error());
  // The lock first: meta.json may be mid-replace by the holder otherwise.
  auto lock = folder_lock::take(*path);
  if (!lock) return tl::make_unexpected(lock.error());
  auto meta = read_meta(*path, run_id);
  if (!meta) return tl::make_unexpected(meta.error());
  auto s = std::make_unique<state>();
  s->path = std::move(*path);
  s->id = run_id;
  s->meta = std::move(*meta);
  s->lock.emplace(std::move(*lock));
  return run_store(std::move(s));
}

const fs::path& run_store::path() const {
  return s_->path;
}
const std::string& run_store::id() const {
  return s_->id;
}
tl::expected<run_store, error> run_store::create_new(const fs::path& results_dir, layout l) {
  std::random_device rd;
  tl::expected<run_store, error> made = tl::unexpected(error{});
  for (int attempt = 0; attempt < 8; ++attempt) {
    made = create(
        results_dir,
        new_run_id(std::chrono::system_clock::now(), static_cast<std::uint16_t>(rd() & 0xffff)), l);
    if (made || made.error().code != errc::exists) break;
  }
  return made;
}

void run_store::made_by(const protocol::initialize_result& init,
                        const std::vector<std::string>& command, boost::json::object fingerprints) {
  auto& meta = s_->meta;
  if (meta.study.empty() || meta.made_by_rust_host) {
    meta.study = init.study;
    meta.study_version = init.study_version;
  }
  if (!meta.made_by_rust_host) meta.initialize = init.raw;
  if (meta.study_command.empty()) meta.study_command = command;
  if (meta.host.empty())
    meta.host = boost::json::object{{"name", "mira-cpp"}, {"version", version}};
  meta.fingerprints = std::move(fingerprints);
}

run_meta& run_store::meta() {
  return s_->meta;
}
const run_meta& run_store::meta() const {
  return s_->meta;
}

run_reader run_store::reader() const {
  s_->dirs.clear();
  return detail::run_reader_access::open_folder(s_->path, s_->meta, &s_->dirs);
}

loaded_run run_store::load() const {
  s_->dirs.clear();
  return load_folder(s_->path, s_->meta, &s_->dirs);
}

write_error run_store::save_meta() {
  auto file = s_->path / "meta.json";
  return {write_file_atomic(file, protocol::to_json_text(s_->meta.to_json()) + "\n"), file};
}

namespace {
std::string now_utc() {
  return iso_utc(std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count());
}
}  // namespace

write_error run_store::begin_session(session_entry session, const plan_keys& keys) {
  if (session.started.empty()) session.started = now_utc();
  if (session.hostname.empty()) session.hostname = hostname();
  if (session.pid == 0) session.pid = ::getpid();
  auto n = s_->meta.sessions.size() + 1;
  if (s_->meta.started.empty()) s_->meta.started = session.started;
  auto marker = json::object{{"session", n},
                             {"started", session.started},
                             {"hostname", session.hostname},
                             {"pid", session.pid}};
  s_->meta.sessions.push_back(std::move(session));
  s_->events += protocol::to_json_text(marker) + "\n";
  auto& started = s_->meta.sessions.back().started;
  // Each file is tried (meta.json, which a resume needs, first); the first failure is returned.
  // The plan's keys name their session, so a crash between the two files leaves keys that no
  // reader takes for the last session's.
  auto first = save_meta();
  const auto keys_file = s_->path / detail::plan_keys_file;
  for (auto e : {keys ? write_error{detail::write_plan_keys(s_->path, n, started, keys), keys_file}
                      : write_error{},
                 flush_events(),
                 append_file(s_->path / "study.stderr.log", "--- session " + std::to_string(n) +
                                                                " started " + started + " ---\n")})
    if (e && !first) first = std::move(e);
  return first;
}

session_entry& run_store::session() {
  return s_->meta.sessions.back();
}

tl::expected<std::unique_ptr<run_store::case_writer>, error> run_store::writer() {
  if (s_->meta.layout == layout::per_case)
    return std::make_unique<per_case_writer>(s_->path, &s_->dirs);
  segment_options options;
  options.journal = s_->path / detail::case_journal_name;
  auto w = segment_writer::open(s_->path / "segments", options);
  if (!w) return tl::make_unexpected(std::move(w.error()));
  return std::make_unique<compact_writer>(std::move(*w));
}

void run_store::append_event(std::string_view line) {
  s_->events += line;
  s_->events += '\n';
  if (s_->events.size() >= (std::size_t{64} << 10)) flush_events();
}

write_error run_store::flush_events() {
  auto ec = append_file(s_->path / "events.ndjson", s_->events);
  s_->events.clear();
  return ec;
}

write_error run_store::append_stderr(std::string_view text) {
  return append_file(s_->path / "study.stderr.log", text);
}

double run_store::seconds() const {
  return s_->meta.seconds();
}

write_error run_store::write_files(const std::vector<report_file>& files) {
  write_error first;
  for (auto& f : files) {
    auto path = s_->path / f.name;
    auto file = atomic_file::create(path);
    write_error e;
    if (!file) {
      e = {file.error(), path};
    } else {
      f.render([&](std::string_view piece) { file->write(piece); });
      e = {file->commit(), path};
    }
    if (e && !first) first = std::move(e);
  }
  return first;
}

write_error run_store::finish(const std::vector<report_file>& files, json::object summary) {
  const auto finished_at = now_utc();
  write_error first;
  auto keep = [&](write_error e) {
    if (e && !first) first = std::move(e);
  };
  keep(flush_events());
  auto& meta = s_->meta;
  meta.format = run_meta::current_format;
  meta.finished = finished_at;
  if (!meta.sessions.empty()) meta.sessions.back().finished = finished_at;
  keep(write_files(files));
  meta.summary = std::move(summary);
  if (first) {
    // Without its report files the run is not finished: meta.json says so, and a resume (which
    // runs nothing more when every case is saved) finishes it.
    meta.finished.clear();
    if (!meta.sessions.empty()) meta.sessions.back().finished.clear();
  }
  keep(save_meta());
  return first;
}

tl::expected<meta_rebuild, error> rebuild_meta(const fs::path& results_dir,
                                               const std::string& run_id) {
  auto path = existing_run(results_dir, run_id);
  if (!path) return tl::make_unexpected(path.error());
  // The lock first: a writer may be replacing meta.json, and none may start meanwhile.
  auto lock = folder_lock::take(*path);
  if (!lock) return tl::make_unexpected(lock.error());
  const auto file = *path / "meta.json";
  if (read_meta(*path, run_id))
    return fail(errc::exists, file.string() + " can be read: it is left as it is");
  meta_rebuild out;
  out.damaged = *path / "meta.json.damaged";
  std::error_code ec;
  const bool compact =
      fs::is_directory(*path / "segments", ec) && !fs::is_directory(*path / "cases", ec);
  out.records_layout = compact ? layout::compact : layout::per_case;
  run_meta meta;
  meta.run_id = run_id;
  meta.layout = out.records_layout;
  auto run = load_folder(*path, std::move(meta), nullptr);
  out.records = run.cases.size();
  out.unreadable = run.unreadable;
  auto [p, report] = run.as_report();
  run.meta.summary =
      aggregate::summary_json(aggregate::summarize(p, report.cases, nullptr, {}), report);
  run.meta.extra["rebuilt"] =
      json::object{{"from", "case records"}, {"at", now_utc()}, {"damaged", "meta.json.damaged"}};
  // A hard link keeps the damaged bytes with no moment without a meta.json, and fails when
  // meta.json.damaged exists (an earlier one is never overwritten).
  if (::link(file.c_str(), out.damaged.c_str()) != 0) {
    if (errno == EEXIST)
      return fail(errc::exists, out.damaged.string() +
                                    " exists: move it away first (it may be the only copy of an "
                                    "earlier damaged meta.json)");
    return fail(errc::io, "cannot keep " + file.string() + " as " + out.damaged.string() + ": " +
                              errno_code().message());
  }
  if (auto failed = write_file_atomic(file, protocol::to_json_text(run.meta.to_json()) + "\n")) {
    ::unlink(out.damaged.c_str());
    return fail(errc::io, write_error{failed, file}.message());
  }
  return out;
}

}  // namespace mira::store
