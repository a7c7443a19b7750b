// Example 4: a pipeline with a custom retry policy. Plans the greet and outage evals and runs
// them through run_plan twice: once with the default classification of failed attempts, once
// with a policy that reads "503" in the transcript's error as the provider pushing back (a rate
// limit: the scheduler lowers that provider's concurrency and backs off) and gives up after one
// retry.
//
// Usage: example_04_retry_policy_pipeline STUDY_CMD [ARGS...]
//        (e.g. build/examples/example_study)
// Exits 0 when the outage case was retried as an infra error by the defaults (4 attempts) and
// as a rate limit by the custom policy (2 attempts), and every greet case passed both times.
#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/schedule/run_plan.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <string>

namespace asio = boost::asio;
namespace schedule = mira::schedule;
using namespace std::chrono_literals;

// The provider answered 503: overloaded, so slow down rather than only try again.
bool says_503(const schedule::attempt& a) {
  return a.result && a.result->transcript.error &&
         a.result->transcript.error->find("503") != std::string::npos;
}

// Prints each case and checks what the example promises for this policy.
bool report(const char* title, const mira::plan::plan& plan, const schedule::run_report& r,
            int outage_attempts, const char* outage_cause) {
  std::printf("== %s\n", title);
  bool as_expected = true;
  for (std::size_t i = 0; i < plan.cases.size(); ++i) {
    auto& rec = r.cases[i];
    std::string causes;
    for (auto& e : rec.retried) causes += (causes.empty() ? "" : ", ") + e.cause;
    std::printf("%-34s %-9s attempts %d%s%s\n", plan.cases[i].key.c_str(),
                std::string(schedule::to_string(rec.state)).c_str(), rec.attempts,
                causes.empty() ? "" : ", retried: ", causes.c_str());
    if (plan.cases[i].params.eval == "outage") {
      as_expected &= rec.attempts == outage_attempts && !rec.retried.empty() &&
                     rec.retried.front().cause == outage_cause;
    } else if (plan.cases[i].available) {
      as_expected &= rec.state == schedule::case_state::passed;
    }
  }
  return as_expected;
}

asio::awaitable<int> demo(std::vector<std::string> argv) {
  auto ex = co_await asio::this_coro::executor;
  mira::study_command cmd;
  cmd.argv = std::move(argv);
  auto host = mira::host_handle::spawn(ex, cmd);
  if (!host) {
    std::fprintf(stderr, "%s\n", host.error().message().c_str());
    co_return 1;
  }
  auto init = co_await host->initialize();
  if (!init) {
    std::fprintf(stderr, "%s\n", init.error().message().c_str());
    co_return 1;
  }
  auto list = co_await host->list_all();
  if (!list) {
    std::fprintf(stderr, "%s\n", list.error().message().c_str());
    co_return 1;
  }
  mira::plan::selection sel;
  sel.evals = {"greet", "outage"};
  auto plan = mira::plan::make_plan(*list, sel);
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.error().message().c_str());
    co_return 1;
  }

  // Both runs back off briefly so the example is quick; the defaults wait 0.5 s, doubling.
  schedule::run_policy defaults;
  defaults.retry.max_retries = 3;
  defaults.retry.base_backoff = 10ms;
  defaults.retry.max_backoff = 100ms;
  auto by_default = co_await schedule::run_plan(*host, *plan, defaults);

  schedule::run_policy custom = defaults;
  custom.retry.max_retries = 1;
  custom.rate_limited = [](const schedule::attempt& a) {
    return schedule::is_rate_limited(a) || says_503(a);
  };
  // Everything else the defaults would retry (retryable errors, a study that died), except
  // infra errors other than 503: those are final at once.
  custom.transient = [](const schedule::attempt& a) {
    return a.result ? false : schedule::is_transient(a, false);
  };
  auto customised = co_await schedule::run_plan(*host, *plan, custom);

  co_await host->shutdown();
  bool ok = report("default classification", *plan, by_default, 4, "infra");
  ok &= report("custom: 503 is a rate limit, one retry", *plan, customised, 2, "rate limit");
  co_return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STUDY_CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  asio::io_context ctx;
  int rc = 1;
  asio::co_spawn(ctx, demo({argv + 1, argv + argc}), [&](std::exception_ptr e, int r) {
    if (!e) rc = r;
  });
  ctx.run();
  return rc;
}
