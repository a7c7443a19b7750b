// The study pool's dispatch bookkeeping, without I/O: which process a request goes to. Kept
// apart from the pool's Asio shell so the choice (fewest in flight, abandoned requests counted,
// under a per-process cap) is tested directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace mira::detail {

class pool_dispatch {
 public:
  /// `slots` processes; at most `cap` requests in flight on each (0: no cap).
  pool_dispatch(std::size_t slots, std::size_t cap);

  /// The slot for the next request: a live one under the cap with the fewest requests in
  /// flight (its abandoned ones counted), ties going round-robin from the last pick so every
  /// process gets work. nullopt when every live slot is at its cap, or none is live.
  std::optional<std::size_t> pick();

  /// A request went to `slot`; returns the slot's generation, to give back to finished().
  std::uint64_t started(std::size_t slot);
  /// A request of `slot` completed. Ignored when the slot was restarted since it started.
  void finished(std::size_t slot, std::uint64_t generation);
  /// Requests the process still works on after their operation was cancelled.
  void set_abandoned(std::size_t slot, std::size_t n);

  /// The process died (or is being restarted): nothing more goes to it.
  void set_dead(std::size_t slot);
  /// A new process took the slot: a new generation, nothing in flight.
  void set_live(std::size_t slot);

  bool live(std::size_t slot) const { return slots_[slot].live; }
  std::uint64_t generation(std::size_t slot) const { return slots_[slot].generation; }
  std::size_t in_flight(std::size_t slot) const { return slots_[slot].in_flight; }
  /// As last set_abandoned().
  std::size_t abandoned(std::size_t slot) const { return slots_[slot].abandoned; }
  /// In flight plus abandoned: what the cap and the choice look at.
  std::size_t load(std::size_t slot) const;
  std::size_t live_count() const;
  std::size_t size() const { return slots_.size(); }
  std::size_t cap() const { return cap_; }

 private:
  struct slot_state {
    std::size_t in_flight = 0;
    std::size_t abandoned = 0;
    std::uint64_t generation = 0;
    bool live = true;
  };
  std::vector<slot_state> slots_;
  std::size_t cap_;
  std::size_t next_ = 0;  // where the round-robin among equally loaded slots starts
};

}  // namespace mira::detail
