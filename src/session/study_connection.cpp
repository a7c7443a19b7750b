// study_connection and start_study (session/study_connection.hpp).
#include <mira/session/study_connection.hpp>

#include "host/study_identity.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace mira {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

study_connection::study_connection(host_handle h, protocol::initialize_result init)
    : conn_(std::move(h)), init_(std::move(init)) {}

study_connection::study_connection(study_pool p) : conn_(std::move(p)) {
  init_ = std::get<study_pool>(conn_).study();
}

std::size_t study_connection::processes() const {
  if (auto* pool = std::get_if<study_pool>(&conn_)) return pool->size();
  return 1;
}

asio::awaitable<tl::expected<protocol::list_result, error>> study_connection::list_all() {
  if (auto* pool = std::get_if<study_pool>(&conn_)) co_return co_await pool->list_all();
  co_return co_await std::get<host_handle>(conn_).list_all();
}

asio::awaitable<schedule::run_report> study_connection::run_plan(const plan::plan& p,
                                                                 schedule::run_policy policy,
                                                                 schedule::run_hooks hooks) {
  if (auto* pool = std::get_if<study_pool>(&conn_))
    co_return co_await schedule::run_plan(*pool, p, std::move(policy), std::move(hooks));
  co_return co_await schedule::run_plan(std::get<host_handle>(conn_), p, std::move(policy),
                                        std::move(hooks));
}

asio::awaitable<void> study_connection::shutdown() {
  if (auto* pool = std::get_if<study_pool>(&conn_))
    co_await pool->shutdown();
  else
    co_await std::get<host_handle>(conn_).shutdown();
}

namespace {

error timed_out(const char* what, std::chrono::milliseconds limit, const std::string& name) {
  error e;
  e.code = errc::timed_out;
  e.diag.message = "the study " + detail::missed(what, limit);
  if (!name.empty()) e.diag.message += " (" + name + ")";
  return e;
}

// The listing within `limit`; the connection is shut down when it fails.
asio::awaitable<tl::expected<started_study, error>> list_within(study_connection c,
                                                                const study_launch& launch) {
  auto limit = launch.init_timeout;
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  auto listed = co_await (c.list_all() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (listed.index() == 0 && std::get<0>(listed))
    co_return started_study{std::move(c), std::move(*std::get<0>(listed))};
  co_await c.shutdown();
  if (listed.index() == 1)
    co_return tl::unexpected(
        timed_out("finish listing its evals", limit, launch.init_timeout_name));
  co_return tl::unexpected(std::move(std::get<0>(listed).error()));
}

}  // namespace

asio::awaitable<tl::expected<started_study, error>> start_study(study_launch launch) {
  auto ex = co_await asio::this_coro::executor;
  if (launch.processes > 1) {
    pool_options o;
    o.processes = launch.processes;
    o.max_in_flight_per_process = launch.max_in_flight_per_process;
    if (launch.host_options_for) o.host_options_for = launch.host_options_for;
    o.init_timeout = launch.init_timeout;
    o.max_restarts = launch.max_restarts;
    o.restart_backoff = launch.restart_backoff;
    o.on_restart = launch.on_pool_restart;
    auto pool = co_await study_pool::start(ex, launch.command, std::move(o));
    if (!pool) co_return tl::unexpected(std::move(pool.error()));
    study_connection started(std::move(*pool));
    co_return co_await list_within(std::move(started), launch);
  }
  auto options = launch.host_options_for ? launch.host_options_for(0) : host_options{};
  auto host = host_handle::spawn(ex, launch.command, std::move(options));
  if (!host) co_return tl::unexpected(std::move(host.error()));
  // A study that never answers (a build that hangs, a blocked import) must not hang the host.
  asio::steady_timer timer(ex, launch.init_timeout);
  auto raced =
      co_await (host->initialize() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (raced.index() == 1 || !std::get<0>(raced)) {
    co_await host->shutdown();
    if (raced.index() == 1)
      co_return tl::unexpected(
          timed_out("answer initialize", launch.init_timeout, launch.init_timeout_name));
    co_return tl::unexpected(std::move(std::get<0>(raced).error()));
  }
  study_connection started(*host, std::move(*std::get<0>(raced)));
  co_return co_await list_within(std::move(started), launch);
}

}  // namespace mira
