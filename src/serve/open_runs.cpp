// Saved runs kept open between requests (open_runs.hpp).
#include "serve/open_runs.hpp"

#include <sys/stat.h>

#include <algorithm>

namespace mira::serve::detail {

namespace fs = std::filesystem;

namespace {

// What changes when a run is saved to: each file's or folder's size and modification time, in
// a fixed order (a missing one counts as -1).
std::vector<std::int64_t> stamp_of(const fs::path& folder) {
  std::vector<std::int64_t> out;
  auto add = [&](const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      out.insert(out.end(), {-1, -1});
      return;
    }
    out.push_back(static_cast<std::int64_t>(st.st_size));
    out.push_back(std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec);
  };
  for (auto* name : {"meta.json", "plan-keys.ndjson", "cases", "segments"}) add(folder / name);
  std::error_code ec;
  std::vector<fs::path> segments;
  for (fs::directory_iterator it(folder / "segments", ec), end; !ec && it != end; it.increment(ec))
    segments.push_back(it->path());
  std::sort(segments.begin(), segments.end());
  for (auto& s : segments) add(s);
  return out;
}

}  // namespace

tl::expected<open_runs::lease, api_error> open_runs::open(const fs::path& results,
                                                          const std::string& id) {
  std::error_code ec;
  if (!fs::exists(results / id / "meta.json", ec))
    return tl::unexpected(make_error(404, "run_not_found", "no run '" + id + "'"));
  auto stamp = stamp_of(results / id);
  lease l;
  std::shared_ptr<std::mutex> use;
  {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const entry& e) { return e.id == id && e.stamp == stamp; });
    if (it != entries_.end()) {
      entries_.splice(entries_.begin(), entries_, it);
      l.reader_ = it->reader;
      use = it->use;
    }
  }
  if (l.reader_) {
    l.use_ = std::unique_lock(*use);
    // The mutex stays alive with the lease: its entry may be dropped meanwhile.
    l.use_keep_ = std::move(use);
    return l;
  }
  auto run = store::run_reader::open(results, id);
  if (!run) return tl::unexpected(make_error(500, "store_error", run.error().message()));
  auto reader = std::make_shared<const store::run_reader>(std::move(*run));
  use = std::make_shared<std::mutex>();
  l.reader_ = reader;
  l.use_ = std::unique_lock(*use);
  l.use_keep_ = use;
  std::lock_guard lock(mutex_);
  entries_.remove_if([&](const entry& e) { return e.id == id; });
  entries_.push_front({id, std::move(stamp), std::move(reader), std::move(use)});
  if (entries_.size() > kept) entries_.pop_back();
  return l;
}

}  // namespace mira::serve::detail
