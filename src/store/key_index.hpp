// Finding a run's saved keys by their text without a second copy of them: a table of their
// indices by hash, open addressing, at most half full (8-byte slots: at most 32 bytes a key,
// usually 16; a hash map of views takes about three times that). A resume looks its plan's keys
// up in it, and a reader the keys of the last session's plan: a million lookups, each one or two
// cache misses. Private to the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace mira::store::detail {

/// `key_at(i)` is the key of the i-th of `size` distinct keys (fewer than 2^32); it must stay
/// valid while the index is used.
template <class KeyAt>
class key_index {
 public:
  key_index(std::size_t size, KeyAt key_at) : key_at_(std::move(key_at)) {
    std::size_t capacity = 2;
    while (capacity < 2 * size) capacity *= 2;
    slots_.resize(capacity);
    mask_ = capacity - 1;
    for (std::size_t i = 0; i < size; ++i) {
      const auto h = hash_(key_at_(i));
      auto at = h & mask_;
      while (slots_[at].index != 0) at = (at + 1) & mask_;
      slots_[at] = {tag(h), static_cast<std::uint32_t>(i + 1)};
    }
  }

  /// The index of `key`, or nothing.
  std::optional<std::size_t> find(std::string_view key) const {
    const auto h = hash_(key);
    for (auto at = h & mask_; slots_[at].index != 0; at = (at + 1) & mask_)
      if (slots_[at].tag == tag(h) && key_at_(slots_[at].index - 1) == key)
        return slots_[at].index - 1;
    return std::nullopt;
  }

 private:
  struct slot {
    std::uint32_t tag = 0;    // the hash's high bits: most other keys fail on it unread
    std::uint32_t index = 0;  // the key's index + 1; 0 for an empty slot
  };
  static std::uint32_t tag(std::size_t h) { return static_cast<std::uint32_t>(h >> 32); }
  KeyAt key_at_;
  std::hash<std::string_view> hash_;
  std::vector<slot> slots_;
  std::size_t mask_ = 0;
};

}  // namespace mira::store::detail
