// The study of a session: a pool of its processes (one or more), started, initialized and
// listed within one time limit. What `mira run --procs`, `mira serve` and any service that runs a
// saved eval share.
#pragma once

#include <mira/error.hpp>
#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/pool.hpp>
#include <mira/protocol/types.hpp>
#include <mira/schedule/run_plan.hpp>

#include <boost/asio/awaitable.hpp>
#include <tl/expected.hpp>

#include <cstddef>

namespace mira {

/// How to start a study: its command, and the pool's options (how many processes, their host
/// options, the initialize limit, restarts).
struct study_launch {
  study_command command = {};
  pool_options pool = {};
};

/// A started, initialized study. Copies share the processes.
class study_connection {
 public:
  explicit study_connection(study_pool p) : pool_(std::move(p)) {}

  const protocol::initialize_result& study() const { return pool_.study(); }
  std::size_t processes() const { return pool_.size(); }
  study_pool& pool() { return pool_; }

  /// schedule::run_plan over the pool (see there).
  boost::asio::awaitable<schedule::run_report> run_plan(const plan::plan& p,
                                                        schedule::run_policy policy,
                                                        schedule::run_hooks hooks);
  /// Every process at once: graceful, then SIGTERM, then SIGKILL.
  boost::asio::awaitable<void> shutdown();

 private:
  study_pool pool_;
};

/// A started study and its listing.
struct started_study {
  study_connection connection;
  protocol::list_result listing;
};

/// Starts `launch` on the calling coroutine's executor, initializes each process and lists every
/// page, each step within launch.pool.init_timeout. On failure every process started
/// is shut down; the error says which step failed (errc::timed_out naming the limit) and
/// carries the study's stderr tail.
boost::asio::awaitable<tl::expected<started_study, error>> start_study(study_launch launch);

}  // namespace mira
