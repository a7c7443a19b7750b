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

asio::awaitable<schedule::run_report> study_connection::run_plan(const plan::plan& p,
                                                                 schedule::run_policy policy,
                                                                 schedule::run_hooks hooks) {
  co_return co_await schedule::run_plan(pool_, p, std::move(policy), std::move(hooks));
}

asio::awaitable<void> study_connection::shutdown() {
  co_await pool_.shutdown();
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
                                                                const pool_options& options) {
  auto limit = options.init_timeout;
  asio::steady_timer timer(co_await asio::this_coro::executor, limit);
  auto listed =
      co_await (c.pool().list_all() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (listed.index() == 0 && std::get<0>(listed))
    co_return started_study{std::move(c), std::move(*std::get<0>(listed))};
  co_await c.shutdown();
  if (listed.index() == 1)
    co_return tl::unexpected(
        timed_out("finish listing its evals", limit, options.init_timeout_name));
  co_return tl::unexpected(std::move(std::get<0>(listed).error()));
}

}  // namespace

asio::awaitable<tl::expected<started_study, error>> start_study(study_launch launch) {
  auto ex = co_await asio::this_coro::executor;
  auto pool = co_await study_pool::start(ex, std::move(launch.command), launch.pool);
  if (!pool) co_return tl::unexpected(std::move(pool.error()));
  study_connection started(std::move(*pool));  // named: g++ 12 and temporaries in co_await
  co_return co_await list_within(std::move(started), launch.pool);
}

}  // namespace mira
