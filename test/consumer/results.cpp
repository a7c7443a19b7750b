// Uses the installed results layer alone (mira::results): reads a saved run and prints its pass
// rate, with no study, no host and no Asio (scripts/test.sh checks that its compile opens no Asio
// or Boost.Process header).
//
// Usage: consumer RESULTS_DIR RUN_ID
#include <mira/aggregate/summary.hpp>
#include <mira/store/run_store.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  auto run = mira::store::load_run(argv[1], argv[2]);
  if (!run) {
    std::fprintf(stderr, "consumer: %s\n", run.error().message().c_str());
    return 1;
  }
  auto [plan, report] = run->as_report();
  auto rate = mira::aggregate::summarize(plan, report.cases).overall;
  std::printf("consumer: run %s: %zu of %zu scored case(s) passed, pass rate %.3f\n", argv[2],
              rate.passed, rate.scored, rate.value());
  return run->unreadable.empty() && rate.scored > 0 ? 0 : 1;
}
