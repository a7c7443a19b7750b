// The study of a session: one process (host_handle) or a pool of them (study_pool), started,
// initialized and listed within one time limit. What `mira run --procs`, `mira serve` and any
// service that runs a saved eval share, so none of them keeps its own variant of the two.
#pragma once

#include <mira/error.hpp>
#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/pool.hpp>
#include <mira/protocol/types.hpp>
#include <mira/schedule/run_plan.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <tl/expected.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <variant>

namespace mira {

/// How to start a study.
struct study_launch {
  study_command command = {};
  /// Processes: 1 is one host_handle; more is a study_pool of that many.
  std::size_t processes = 1;
  /// A pool's requests in flight per process (pool_options::max_in_flight_per_process).
  std::size_t max_in_flight_per_process = 0;
  /// The host options of the process in `slot`: 0 for a single process, else 1..processes.
  /// Empty: host_options{}.
  std::function<host_options(std::size_t slot)> host_options_for = {};
  /// initialize, and then the whole listing, must each answer within this.
  std::chrono::milliseconds init_timeout{60000};
  /// How the caller's users name init_timeout (e.g. "--init-timeout"): a message about a missed
  /// limit ends with it in parentheses.
  std::string init_timeout_name = {};
  /// A pool's restarts of a dead process (a single process is restarted by the session).
  int max_restarts = 3;
  std::chrono::milliseconds restart_backoff{500};
  /// A pool's slot whose process died and is started again, or whose restart failed.
  std::function<void(std::size_t slot, const std::string& what)> on_pool_restart = {};
};

/// A started, initialized study: one process or a pool. Copies share the processes.
class study_connection {
 public:
  study_connection(host_handle h, protocol::initialize_result init);  // NOLINT
  explicit study_connection(study_pool p);

  const protocol::initialize_result& study() const { return init_; }
  std::size_t processes() const;
  bool is_pool() const { return std::holds_alternative<study_pool>(conn_); }
  /// The single process (nullptr for a pool).
  host_handle* handle() { return std::get_if<host_handle>(&conn_); }
  /// A restarted single process replaces the dead one, so shutdown() reaches the live one.
  void replace(host_handle h) { conn_ = std::move(h); }

  boost::asio::awaitable<tl::expected<protocol::list_result, error>> list_all();
  /// schedule::run_plan over the process or the pool (see there).
  boost::asio::awaitable<schedule::run_report> run_plan(const plan::plan& p,
                                                        schedule::run_policy policy,
                                                        schedule::run_hooks hooks);
  /// Every process: graceful, then SIGTERM, then SIGKILL (a pool's all at once).
  boost::asio::awaitable<void> shutdown();

 private:
  std::variant<host_handle, study_pool> conn_;
  protocol::initialize_result init_;
};

/// A started study and its listing.
struct started_study {
  study_connection connection;
  protocol::list_result listing;
};

/// Starts `launch` on the calling coroutine's executor, initializes it (each process of a pool)
/// and lists every page, each step within launch.init_timeout. On failure every process started
/// is shut down; the error says which step failed (errc::timed_out naming the limit) and
/// carries the study's stderr tail.
boost::asio::awaitable<tl::expected<started_study, error>> start_study(study_launch launch);

}  // namespace mira
