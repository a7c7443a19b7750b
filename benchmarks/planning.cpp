// Planning at scale: a study listing 1 000 000 samples in 2 000 pages with 3 targets, planned
// with 2 trials (6 000 000 cases), then a resume's subtraction of 1 000 000 saved keys.
//
//   planning [-s SAMPLES] [-t TRIALS] [-k SAVED] -- STUDY_CMD [ARGS...]
//            (the study: echo_study --samples SAMPLES --targets 3)
//
// Prints seconds for listing (every page through the host), planning and subtracting, peak
// RSS and the bytes per planned case. The subtraction mirrors `mira run --resume`: a map of
// saved records by key, looked up once per planned case.
#include "bench_util.hpp"

#include <mira/host.hpp>
#include <mira/plan/plan.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

namespace {

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  auto args = bench::parse_args(argc, argv);
  auto trials = static_cast<std::int64_t>(args.number("-t", 2));
  std::size_t saved_keys = args.number("-k", 1000000);
  auto& study = args.study;
  if (study.empty()) {
    std::fprintf(stderr, "usage: planning [-t TRIALS] [-k SAVED] -- STUDY_CMD [ARGS...]\n");
    return 2;
  }
  asio::io_context ctx;
  mira::protocol::list_result listing;
  double list_s = 0;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto host = co_await bench::start_study(ctx.get_executor(), study);
        auto t0 = clock_type::now();
        auto list = co_await host.list_all();
        list_s = since(t0);
        if (!list) std::exit(1);
        listing = std::move(*list);
        co_await host.shutdown();
      },
      asio::detached);
  ctx.run();
  std::size_t samples = listing.evals.empty() ? 0 : listing.evals[0].samples.size();
  double rss_listed = bench::rss_mib();

  mira::plan::selection sel;
  sel.trials = trials;
  auto t0 = clock_type::now();
  auto p = mira::plan::make_plan(listing, sel);
  double plan_s = since(t0);
  if (!p) {
    std::fprintf(stderr, "planning failed: %s\n", p.error().message().c_str());
    return 1;
  }
  double rss_planned = bench::rss_mib();

  // What a resumed run has: saved records by key (here every other case up to `saved_keys`).
  std::map<std::string, boost::json::object> saved;
  for (std::size_t i = 0; i < p->cases.size() && saved.size() < saved_keys; i += 2)
    saved.emplace(p->cases[i].key, boost::json::object{{"status", "passed"}});
  t0 = clock_type::now();
  std::size_t todo = 0;
  for (const auto& c : p->cases) todo += saved.find(c.key) == saved.end();
  double subtract_s = since(t0);

  std::printf("planning: %zu samples listed in %.2f s through the host\n", samples, list_s);
  std::printf("planned %zu cases in %.2f s (%.0f ns per case)\n", p->cases.size(), plan_s,
              plan_s / static_cast<double>(p->cases.size()) * 1e9);
  std::printf("rss_mib listed %.0f planned %.0f peak %.0f; plan bytes_per_case %.0f\n", rss_listed,
              rss_planned, bench::peak_rss_mib(),
              (rss_planned - rss_listed) * 1048576.0 / static_cast<double>(p->cases.size()));
  std::printf("resume subtraction: %zu saved keys, %zu cases to run, %.2f s (%.0f ns per case)\n",
              saved.size(), todo, subtract_s,
              subtract_s / static_cast<double>(p->cases.size()) * 1e9);
  return 0;
}
