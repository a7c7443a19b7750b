// The bookkeeping of idle keep-alive connections: per key, the newest first, each dropped once
// it expires (idle too long) or when its key holds too many. No I/O and no lock: the client's
// connection cache (client.cpp) holds one per execution context behind its mutex; tests drive
// it with plain values.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mira::models::detail {

template <class T>
class idle_pool {
 public:
  using clock = std::chrono::steady_clock;

  /// The most recently put entry of `key` that has not expired; when that one has, every entry
  /// of the key has and all are dropped (an expired entry is never given out).
  std::optional<T> take(const std::string& key, clock::time_point now) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    auto& list = it->second;
    std::optional<T> out;
    // Newest at the back; each key's entries come from one client, with one idle timeout, so
    // they expire in order.
    if (!list.empty() && now < list.back().expires) {
      out.emplace(std::move(list.back().item));
      list.pop_back();
    } else {
      list.clear();
    }
    if (list.empty()) entries_.erase(it);
    return out;
  }

  /// Keeps `item` until `expires`; when `key` then holds more than `max_per_key`, the oldest go.
  /// Returns what was dropped (the caller closes it, outside any lock it holds).
  std::vector<T> put(const std::string& key, T item, clock::time_point expires,
                     std::size_t max_per_key) {
    std::vector<T> dropped;
    if (max_per_key == 0) {
      dropped.push_back(std::move(item));
      return dropped;
    }
    auto& list = entries_[key];
    list.push_back({std::move(item), expires});
    while (list.size() > max_per_key) {
      dropped.push_back(std::move(list.front().item));
      list.pop_front();
    }
    return dropped;
  }

  /// Drops every expired entry, of any key (those of clients gone too).
  std::vector<T> sweep(clock::time_point now) {
    std::vector<T> dropped;
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto& list = it->second;
      while (!list.empty() && list.front().expires <= now) {
        dropped.push_back(std::move(list.front().item));
        list.pop_front();
      }
      it = list.empty() ? entries_.erase(it) : std::next(it);
    }
    return dropped;
  }

  /// Everything, dropped.
  std::vector<T> clear() {
    std::vector<T> dropped;
    for (auto& [key, list] : entries_)
      for (auto& e : list) dropped.push_back(std::move(e.item));
    entries_.clear();
    return dropped;
  }

  std::size_t size(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? 0 : it->second.size();
  }
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& [key, list] : entries_) n += list.size();
    return n;
  }

 private:
  struct entry {
    T item;
    clock::time_point expires;
  };
  std::map<std::string, std::deque<entry>> entries_;
};

}  // namespace mira::models::detail
