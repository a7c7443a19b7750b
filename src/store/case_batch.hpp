// Case records handed to a run's writer together: their keys and lines in two buffers, so that
// a batch of any size is three allocations, and none once its buffers are reused. A session
// fills one per turn of its event loop and the writer gives it back with what became of each
// record (case_writer), so the session can tell which cases are saved.
#pragma once

#include <mira/plan/plan.hpp>
#include <mira/schedule/results.hpp>

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mira::store {

class case_batch {
 public:
  /// Appends a record given as text (as case_writer::submit() takes it): the writer checks it.
  /// Its case_index() is no_case.
  void add(std::string_view key, std::string_view record) {
    keys_ += key;
    records_ += record;
    ends_.push_back({keys_.size(), records_.size(), no_case, 0});
    made_here_ = false;
  }
  /// Appends the record of case `i` of `cases` with outcome `r`, written in place by
  /// append_case_line() (records.hpp): never copied, and known to be one JSON object on one
  /// line under a key of the plan's, so the writer need not check it. Its case_index() is `i`.
  void add_case(const plan::case_list& cases, std::size_t i, const schedule::case_record& r);

  static constexpr std::size_t no_case = static_cast<std::size_t>(-1);

  std::size_t size() const noexcept { return ends_.size(); }
  bool empty() const noexcept { return ends_.empty(); }
  std::string_view key(std::size_t i) const noexcept {
    const auto from = i ? ends_[i - 1].key : 0;
    return std::string_view(keys_).substr(from, ends_[i].key - from);
  }
  std::string_view record(std::size_t i) const noexcept {
    const auto from = i ? ends_[i - 1].record : 0;
    return std::string_view(records_).substr(from, ends_[i].record - from);
  }
  /// The plan index add_case() was given for record `i` (no_case for one given to add()).
  std::size_t case_index(std::size_t i) const noexcept { return ends_[i].case_index; }
  /// 1 + the case_state add_case() wrote into record `i`, 0 for one given to add() (its text
  /// says).
  std::uint8_t state_code(std::size_t i) const noexcept { return ends_[i].state; }
  /// Every record came through add_case() (or there is none).
  bool made_here() const noexcept { return made_here_; }
  /// Empties the batch and keeps its buffers for the next records.
  void clear() noexcept {
    keys_.clear();
    records_.clear();
    ends_.clear();
    made_here_ = true;
  }

 private:
  struct ends {
    std::size_t key, record, case_index;
    std::uint8_t state;
  };
  std::string keys_, records_;
  std::vector<ends> ends_;
  bool made_here_ = true;
};

/// A record of a batch that was not saved: its key, the file it was going to (a result.json,
/// the segment that failed), why, and its place in the batch.
struct save_failure {
  std::string key;
  std::filesystem::path file;
  boost::system::error_code error;
  std::size_t index = 0;
};

}  // namespace mira::store
