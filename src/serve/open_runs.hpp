// Saved runs kept open between requests: a viewer going through one run's cases, a page at a
// time or a case at a time, opens the run (its index of keys and places) once, not per request.
// A run is taken from here while its folder is as it was when it was opened (the times and
// sizes of meta.json, plan-keys.ndjson, cases/ and every segment); a run being saved to changes
// them and is opened again. Shared with the worker threads that read runs; a reader is used by
// one of them at a time. Private to the library.
#pragma once

#include <mira/store/run_reader.hpp>

#include "serve/api.hpp"

#include <tl/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mira::serve::detail {

class open_runs {
 public:
  /// Runs kept open at once (the least recently used goes first): two, for a comparison. A
  /// reader of a million cases keeps about 46 MB.
  static constexpr std::size_t kept = 2;

  /// A run opened for the caller alone until this is destroyed.
  class lease {
   public:
    const store::run_reader& operator*() const { return *reader_; }
    const store::run_reader* operator->() const { return reader_.get(); }

   private:
    friend class open_runs;
    std::shared_ptr<const store::run_reader> reader_;
    std::shared_ptr<std::mutex> use_keep_;  // declared before use_: outlives the lock
    std::unique_lock<std::mutex> use_;
  };

  /// The run `id` in `results`: the one kept when its folder is unchanged, else opened anew
  /// (and kept). 404 when there is no such run, 500 when it cannot be read.
  tl::expected<lease, api_error> open(const std::filesystem::path& results, const std::string& id);

 private:
  struct entry {
    std::string id;
    std::vector<std::int64_t> stamp;
    std::shared_ptr<const store::run_reader> reader;
    std::shared_ptr<std::mutex> use;
  };
  std::mutex mutex_;
  std::list<entry> entries_;  // most recently used first
};

}  // namespace mira::serve::detail
