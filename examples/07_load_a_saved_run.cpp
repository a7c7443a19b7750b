// Example 7: read a saved run with the library alone (no study, no lock: the run may still be
// going) and print its summary: who made it, its sessions, and the verdicts of its cases.
//
// Usage: example_07_load_a_saved_run RESULTS_DIR RUN_ID
#include <mira/aggregate/summary.hpp>
#include <mira/store/run_store.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RESULTS_DIR RUN_ID\n", argv[0]);
    return 2;
  }
  auto run = mira::store::load_run(argv[1], argv[2]);
  if (!run) {
    std::fprintf(stderr, "%s\n", run.error().message().c_str());
    return 3;
  }
  for (auto& why : run->unreadable) std::fprintf(stderr, "unreadable: %s\n", why.c_str());
  auto& meta = run->meta;
  std::printf("run %s by study %s %s, %zu session(s), %.2f s\n", meta.run_id.c_str(),
              meta.study.c_str(), meta.study_version.c_str(), meta.sessions.size(), meta.seconds());
  auto [plan, report] = run->as_report();
  auto s = mira::aggregate::summarize(plan, report.cases);
  using mira::schedule::case_state;
  std::printf("%zu case(s): %zu passed, %zu failed, %zu n/a, %zu skipped, %zu error(s)\n",
              plan.cases.size(), s.count(case_state::passed), s.count(case_state::failed),
              s.count(case_state::na), s.count(case_state::skipped), s.count(case_state::error));
  return run->unreadable.empty() ? 0 : 3;
}
