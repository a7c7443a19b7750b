// Example 8: compare two saved runs of one study with the library alone (no study needed):
// cases paired by key and trial, the overall change with its interval and exact McNemar p, the
// change per eval, the cases that regressed and the gate. Exits 1 when the gate fails (a
// significant drop, missing cases or a stopped candidate, nothing scored in both runs).
//
// Usage: example_08_compare_two_runs RESULTS_DIR BASE_RUN_ID CANDIDATE_RUN_ID
#include <mira/compare/compare.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s RESULTS_DIR BASE_RUN_ID CANDIDATE_RUN_ID\n", argv[0]);
    return 2;
  }
  auto base = mira::compare::load(argv[1], argv[2]);
  auto candidate = mira::compare::load(argv[1], argv[3]);
  if (!base || !candidate) {
    std::fprintf(stderr, "%s\n", (!base ? base.error() : candidate.error()).message().c_str());
    return 2;
  }
  mira::compare::options o;
  o.alpha = 0.05;
  auto c = mira::compare::compare_runs(*base, *candidate, o);
  if (!c) {
    std::fprintf(stderr, "%s\n", c.error().message().c_str());
    return 2;
  }
  auto& t = c->overall.table;
  std::printf("%zu paired, %zu regressed, %zu fixed, %zu unpaired; delta %+.3f, p %.4g\n", t.n(),
              t.regressed, t.fixed, c->count(mira::compare::change::unpaired), t.delta(),
              c->overall.p_value);
  for (auto& g : c->per_eval)
    if (g.ci)
      std::printf("  %s: %+.3f [%+.3f, %+.3f]\n", g.name.c_str(), g.table.delta(), g.ci->low,
                  g.ci->high);
  for (auto& p : c->cases)
    if (p.what == mira::compare::change::regressed) std::printf("  regressed: %s\n", p.key.c_str());
  std::printf("gate: %s\n", c->gate.summary().c_str());
  return c->gate.passed() ? 0 : 1;
}
