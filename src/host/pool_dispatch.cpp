// The study pool's dispatch bookkeeping (see pool_dispatch.hpp).
#include "pool_dispatch.hpp"

namespace mira::detail {

pool_dispatch::pool_dispatch(std::size_t slots, std::size_t cap) : slots_(slots), cap_(cap) {}

std::optional<std::size_t> pool_dispatch::pick() {
  std::optional<std::size_t> best;
  std::size_t best_load = 0;
  const auto n = slots_.size();
  for (std::size_t k = 0; k < n; ++k) {
    auto i = (next_ + k) % n;
    if (!slots_[i].live) continue;
    auto l = load(i);
    if (cap_ != 0 && l >= cap_) continue;
    if (!best || l < best_load) {
      best = i;
      best_load = l;
    }
  }
  if (best) next_ = (*best + 1) % n;
  return best;
}

std::uint64_t pool_dispatch::started(std::size_t slot) {
  ++slots_[slot].in_flight;
  return slots_[slot].generation;
}

void pool_dispatch::finished(std::size_t slot, std::uint64_t generation) {
  auto& s = slots_[slot];
  if (s.generation == generation && s.in_flight > 0) --s.in_flight;
}

void pool_dispatch::set_abandoned(std::size_t slot, std::size_t n) {
  slots_[slot].abandoned = n;
}

void pool_dispatch::set_dead(std::size_t slot) {
  slots_[slot].live = false;
}

void pool_dispatch::set_live(std::size_t slot) {
  auto& s = slots_[slot];
  s = slot_state{0, 0, s.generation + 1, true};
}

std::size_t pool_dispatch::load(std::size_t slot) const {
  return slots_[slot].in_flight + slots_[slot].abandoned;
}

std::size_t pool_dispatch::live_count() const {
  std::size_t n = 0;
  for (auto& s : slots_) n += s.live;
  return n;
}

}  // namespace mira::detail
