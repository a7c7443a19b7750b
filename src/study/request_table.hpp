// The study's requests in flight (run, execute, score), sans I/O: which are running, which wait
// for a free slot, and what a `cancel` or the end of the input does to each. The request loop keeps
// the payload and does the I/O; tests drive the table directly.
//
// Cancellation, by the request's state:
//   state                 | `cancel {id}`                          | end of input
//   waiting for a slot    | removed, answered `cancelled`; true    | the same
//   running               | its stop is requested; true            | the same
//   running, stop already | nothing more; true                     | nothing more
//   unknown or answered   | false                                  | -
// A running request answers for itself: `cancelled` if its subject ends by throwing, its
// result if it returns one anyway. Only a finished request frees its slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mira::study::detail {

template <class Payload>
class request_table {
 public:
  enum class admitted { start, wait, duplicate };
  enum class cancelled { unknown, removed_waiting, stop_running, already_stopping };

  explicit request_table(std::size_t max_running) : max_running_(max_running ? max_running : 1) {}

  /// A new request: started when a slot is free, else queued behind the others. An id already in
  /// flight is refused (the payload is dropped).
  admitted admit(std::int64_t id, Payload p) {
    if (entries_.contains(id)) return admitted::duplicate;
    auto it = entries_.end();
    if (spare_.empty()) {
      it = entries_.try_emplace(id).first;
    } else {
      spare_.back().key() = id;
      it = entries_.insert(std::move(spare_.back())).position;
      spare_.pop_back();
      it->second.running = false;
      it->second.stopping = false;
    }
    it->second.payload = std::move(p);
    if (running_ < max_running_) {
      it->second.running = true;
      ++running_;
      return admitted::start;
    }
    waiting_.push_back(id);
    return admitted::wait;
  }

  /// The payload of a request in flight, or nullptr.
  Payload* find(std::int64_t id) {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second.payload;
  }

  /// What `cancel {id}` (or the end of the input) does. A waiting request removed is returned
  /// through `removed` for the caller to answer.
  cancelled cancel(std::int64_t id, std::optional<Payload>* removed = nullptr) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return cancelled::unknown;
    auto& e = it->second;
    if (!e.running) {
      std::erase(waiting_, id);
      if (removed) *removed = std::move(e.payload);
      release(it);
      return cancelled::removed_waiting;
    }
    if (e.stopping) return cancelled::already_stopping;
    e.stopping = true;
    return cancelled::stop_running;
  }

  /// A running request answered: its slot goes to the next waiting one, returned to be started.
  std::optional<std::int64_t> finish(std::int64_t id) {
    auto it = entries_.find(id);
    if (it == entries_.end() || !it->second.running) return std::nullopt;
    release(it);
    --running_;
    while (!waiting_.empty()) {
      auto next = waiting_.front();
      waiting_.pop_front();
      auto n = entries_.find(next);
      if (n == entries_.end()) continue;
      n->second.running = true;
      ++running_;
      return next;
    }
    return std::nullopt;
  }

  /// Every id in flight, waiting ones first (in order), for the end of the input.
  std::vector<std::int64_t> ids() const {
    std::vector<std::int64_t> out(waiting_.begin(), waiting_.end());
    for (auto& [id, e] : entries_)
      if (e.running) out.push_back(id);
    return out;
  }

  std::size_t running() const noexcept { return running_; }
  std::size_t waiting() const noexcept { return waiting_.size(); }
  bool empty() const noexcept { return entries_.empty(); }

 private:
  struct entry {
    Payload payload{};
    bool running = false;
    bool stopping = false;
  };
  using map = std::unordered_map<std::int64_t, entry>;

  // An entry's node is kept for the next request instead of freed: no allocation per request
  // once as many have been in flight. Its payload lives on until a new one is moved over it.
  void release(typename map::iterator it) {
    if (spare_.size() < max_spare) {
      spare_.push_back(entries_.extract(it));
    } else {
      entries_.erase(it);
    }
  }
  static constexpr std::size_t max_spare = 4096;

  std::size_t max_running_;
  std::size_t running_ = 0;
  map entries_;
  std::vector<typename map::node_type> spare_;
  std::deque<std::int64_t> waiting_;
};

}  // namespace mira::study::detail
