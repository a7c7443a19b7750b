// The comparison of two runs: the exact McNemar p-values and the Newcombe intervals against
// values computed by hand for known tables, the edge cases (no discordant pair, nothing scored,
// no cases), the pairing of cases (by logical key and trial; unpaired cases counted and listed;
// passed -> error a regression), each rule of the gate, and each output format's escaping.
#include <boost/test/unit_test.hpp>

#include <mira/compare/compare.hpp>
#include <mira/plan/plan.hpp>
#include <mira/store/records.hpp>

#include <boost/json/parse.hpp>

using namespace mira;
using compare::change;
using compare::paired_table;
using schedule::case_state;

namespace {

constexpr double z95 = 1.959963984540054;

// One saved case of the study "s".
store::saved_case saved(const std::string& eval, const std::string& sample, case_state st,
                        std::int64_t trial = 0, std::int64_t trials = 1,
                        protocol::axis_params params = {}, const std::string& target = "t") {
  plan::planned_case c;
  c.params.eval = eval;
  c.params.sample = sample;
  c.params.target = target;
  c.params.trial = trial;
  c.params.trials = trials;
  c.params.params = std::move(params);
  c.key = plan::case_key(c.params);
  schedule::case_record r;
  r.state = st;
  r.attempts = 1;
  return {c.key, boost::json::parse(store::case_line(c, r)).as_object()};
}

// A run that ran to its end: its one session finished, stopped by nothing.
store::loaded_run run(const std::string& id, std::vector<store::saved_case> cases,
                      const std::string& study = "s") {
  store::loaded_run r;
  r.meta.run_id = id;
  r.meta.study = study;
  r.meta.finished = "2026-11-30T08:15:10Z";
  r.meta.sessions.emplace_back().finished = r.meta.finished;
  r.cases = std::move(cases);
  return r;
}

// The check of one rule of a comparison's gate.
const compare::gate_check& rule(const compare::comparison& c, compare::gate_rule r) {
  return c.gate.checks.at(static_cast<std::size_t>(r));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(compare_runs)

BOOST_AUTO_TEST_CASE(mcnemar_exact_p_values_of_known_tables) {
  // b=1, c=9: p = 2 * sum_{k<=1} C(10,k) / 2^10 = 2 * (1 + 10) / 1024 = 0.021484375.
  BOOST_TEST(compare::mcnemar_exact_p(1, 9) == 0.021484375, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(compare::mcnemar_exact_p(9, 1) == 0.021484375, boost::test_tools::tolerance(1e-12));
  // b=2, c=8: p = 2 * (1 + 10 + 45) / 1024 = 112 / 1024 = 0.109375.
  BOOST_TEST(compare::mcnemar_exact_p(2, 8) == 0.109375, boost::test_tools::tolerance(1e-12));
  // b=0, c=5: p = 2 * C(5,0) / 2^5 = 2 / 32 = 0.0625 (five flips one way are not enough at 0.05).
  BOOST_TEST(compare::mcnemar_exact_p(0, 5) == 0.0625, boost::test_tools::tolerance(1e-12));
  // b=0, c=6: p = 2 / 64 = 0.03125.
  BOOST_TEST(compare::mcnemar_exact_p(6, 0) == 0.03125, boost::test_tools::tolerance(1e-12));
  // b=3, c=3: 2 * (1 + 6 + 15 + 20) / 64 = 84 / 64 > 1, so 1.
  BOOST_TEST(compare::mcnemar_exact_p(3, 3) == 1.0);
  // No discordant pair: nothing against the null.
  BOOST_TEST(compare::mcnemar_exact_p(0, 0) == 1.0);
  // A large table stays finite (C(1000, k) overflows a double): 400 against 600 is far out.
  const double p = compare::mcnemar_exact_p(400, 600);
  BOOST_TEST(p > 0.0);
  BOOST_TEST(p < 1e-9);
}

BOOST_AUTO_TEST_CASE(two_sided_z_is_the_normal_quantile) {
  BOOST_TEST(compare::two_sided_z(0.95) == z95, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(compare::two_sided_z(0.99) == 2.5758293035489, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(newcombe_interval_of_a_table_with_correlation) {
  // a=10 both pass, b=5 regressed, c=1 fixed, d=4 both fail; n=20. Base p1 = 15/20 = 0.75,
  // candidate p2 = 11/20 = 0.55; theta = p1 - p2 = 0.2.
  // Wilson 95% (z = 1.959964): 15/20 -> [0.531299, 0.888138]; 11/20 -> [0.342085, 0.741802].
  // ad - bc = 40 - 5 = 35 > n/2, so corrected to 35 - 10 = 25; margins (a+b)(c+d)(a+c)(b+d) =
  // 15 * 5 * 11 * 9 = 7425; phi = 25 / sqrt(7425) = 0.290129.
  // L = 0.2 - sqrt(0.218701^2 - 2 * 0.290129 * 0.218701 * 0.191802 + 0.191802^2) = -0.045515
  // U = 0.2 + sqrt(0.207915^2 - 2 * 0.290129 * 0.207915 * 0.138138 + 0.138138^2) = 0.413647
  // and for candidate - base, negated: [-0.413647, 0.045515].
  paired_table t{10, 5, 1, 4};
  BOOST_TEST(t.delta() == -0.2, boost::test_tools::tolerance(1e-12));
  auto ci = compare::paired_difference_interval(t, 0.95);
  BOOST_REQUIRE(ci);
  BOOST_TEST(ci->low == -0.41364712298252104, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(ci->high == 0.045515468260013375, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(newcombe_interval_with_no_correlation_and_with_a_small_one) {
  // a=8, b=2, c=8, d=2: ad - bc = 16 - 16 = 0, so phi = 0 and the interval is Newcombe's
  // square-and-add of the two Wilson intervals: p1 = 0.5 [0.299298, 0.700702], p2 = 0.8
  // [0.583983, 0.919342]; theta = -0.3;
  // L = -0.3 - sqrt(0.200702^2 + 0.119342^2) = -0.533503,
  // U = -0.3 + sqrt(0.216017^2 + 0.200702^2) = -0.005136; negated: [0.005136, 0.533503].
  auto ci = compare::paired_difference_interval({8, 2, 8, 2}, 0.95);
  BOOST_REQUIRE(ci);
  BOOST_TEST(ci->low == 0.005135928689325886, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(ci->high == 0.5335034967920657, boost::test_tools::tolerance(1e-9));
  // a=3, b=1, c=9, d=7: ad - bc = 21 - 9 = 12 > 10, corrected to 2; margins 4 * 16 * 12 * 8 =
  // 6144; phi = 2 / sqrt(6144) = 0.025516. p1 = 0.2 [0.080658, 0.416017], p2 = 0.6
  // [0.386582, 0.781193]; theta = -0.4;
  // L = -0.4 - sqrt(0.119342^2 - 2 * 0.025516 * 0.119342 * 0.181193 + 0.181193^2) = -0.614407
  // U = -0.4 + sqrt(0.213418^2 - 2 * 0.025516 * 0.213418 * 0.216017 + 0.216017^2) = -0.100236
  ci = compare::paired_difference_interval({3, 1, 9, 7}, 0.95);
  BOOST_REQUIRE(ci);
  BOOST_TEST(ci->low == 0.10023617948808994, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(ci->high == 0.6144065494134852, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(newcombe_interval_edge_cases) {
  // No pairs: no interval.
  BOOST_TEST(!compare::paired_difference_interval({0, 0, 0, 0}, 0.95));
  // Everything failed twice (n=5): an empty margin makes phi 0; Wilson 0/5 = [0, 0.434482],
  // so the interval is +-sqrt(0.434482^2 + 0) = [-0.434482, 0.434482].
  auto ci = compare::paired_difference_interval({0, 0, 0, 5}, 0.95);
  BOOST_REQUIRE(ci);
  BOOST_TEST(ci->low == -0.43448246478317476, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(ci->high == 0.43448246478317476, boost::test_tools::tolerance(1e-9));
  // Everything passed twice: the mirror image.
  ci = compare::paired_difference_interval({5, 0, 0, 0}, 0.95);
  BOOST_REQUIRE(ci);
  BOOST_TEST(ci->low == -0.43448246478317476, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(ci->high == 0.43448246478317476, boost::test_tools::tolerance(1e-9));
  // Bounds stay within [-1, 1] when every pair flips.
  ci = compare::paired_difference_interval({0, 4, 0, 0}, 0.95);
  BOOST_REQUIRE(ci);
  BOOST_TEST(ci->low >= -1.0);
  BOOST_TEST(ci->high <= 0.0);
}

BOOST_AUTO_TEST_CASE(cases_pair_by_logical_key_and_trial_and_unpaired_ones_are_listed) {
  using st = case_state;
  auto base = run("r1", {saved("e", "a", st::passed), saved("e", "b", st::passed),
                         saved("e", "c", st::failed), saved("e", "d", st::passed),
                         saved("e", "gone", st::passed), saved("e", "na", st::passed),
                         saved("f", "x", st::failed), saved("e", "err", st::error)});
  auto cand = run(
      "r2", {saved("e", "a", st::passed), saved("e", "b", st::failed), saved("e", "c", st::passed),
             saved("e", "d", st::failed), saved("e", "new", st::passed), saved("e", "na", st::na),
             saved("f", "x", st::failed), saved("e", "err", st::passed)});
  auto c = compare::compare_runs(base, cand);
  BOOST_REQUIRE(c);
  BOOST_TEST(c->overall.table.both_pass == 1u);
  BOOST_TEST(c->overall.table.regressed == 2u);  // b, d
  BOOST_TEST(c->overall.table.fixed == 1u);      // c
  BOOST_TEST(c->overall.table.both_fail == 1u);  // f/x
  BOOST_TEST(c->only_in_base == 1u);
  BOOST_TEST(c->only_in_candidate == 1u);
  BOOST_TEST(c->not_scored == 2u);  // na, err
  BOOST_TEST(c->overall.unpaired == 4u);
  std::vector<std::string> regressed, unpaired;
  for (auto& p : c->cases) {
    if (p.what == change::regressed) regressed.push_back(p.key);
    if (p.what == change::unpaired) unpaired.push_back(p.key + " " + p.why());
  }
  BOOST_TEST(regressed == (std::vector<std::string>{"e/b@t", "e/d@t"}),
             boost::test_tools::per_element());
  BOOST_TEST(unpaired ==
                 (std::vector<std::string>{"e/err@t error -> passed", "e/gone@t only in the base",
                                           "e/na@t passed -> na", "e/new@t only in the candidate"}),
             boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(c->per_eval.size(), 2u);
  BOOST_TEST(c->per_eval[0].name == "e");
  BOOST_TEST(c->per_eval[0].table.n() == 4u);
  BOOST_TEST(c->per_eval[1].name == "f");
  BOOST_TEST(c->per_eval[1].table.n() == 1u);
  BOOST_TEST(!c->regression());  // 2 against 1 is nothing
}

BOOST_AUTO_TEST_CASE(a_run_of_one_trial_pairs_with_trial_0_of_several) {
  using st = case_state;
  auto base = run("r1", {saved("e", "a", st::passed)});
  auto cand = run("r2", {saved("e", "a", st::failed, 0, 2), saved("e", "a", st::passed, 1, 2)});
  auto c = compare::compare_runs(base, cand);
  BOOST_REQUIRE(c);
  BOOST_TEST(c->overall.table.regressed == 1u);
  BOOST_TEST(c->only_in_candidate == 1u);  // trial 1
}

BOOST_AUTO_TEST_CASE(a_significant_drop_is_a_regression_and_group_by_an_axis_breaks_it_down) {
  using st = case_state;
  std::vector<store::saved_case> b, k;
  for (int i = 0; i < 12; ++i) {
    auto id = "s" + std::to_string(i);
    protocol::axis_params effort{{"effort", i < 8 ? "low" : "high"}};
    b.push_back(saved("e", id, st::passed, 0, 1, effort));
    // The eight "low" cases fail in the candidate: b=8, c=0, p = 2/256 = 0.0078125.
    k.push_back(saved("e", id, i < 8 ? st::failed : st::passed, 0, 1, effort));
  }
  auto c = compare::compare_runs(run("r1", b), run("r2", k), {"effort", 0.05});
  BOOST_REQUIRE(c);
  BOOST_TEST(c->overall.p_value == 0.0078125, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c->regression());
  BOOST_REQUIRE_EQUAL(c->groups.size(), 2u);
  BOOST_TEST(c->groups[0].name == "high");
  BOOST_TEST(c->groups[0].table.regressed == 0u);
  BOOST_TEST(c->groups[1].name == "low");
  BOOST_TEST(c->groups[1].significant_drop);
  // At alpha 0.005 the same drop is not significant.
  c = compare::compare_runs(run("r1", b), run("r2", k), {"", 0.005});
  BOOST_REQUIRE(c);
  BOOST_TEST(!c->regression());
}

BOOST_AUTO_TEST_CASE(edge_cases_zero_cases_all_na_and_bad_input) {
  using st = case_state;
  auto c = compare::compare_runs(run("r1", {}), run("r2", {}));
  BOOST_REQUIRE(c);
  BOOST_TEST(c->overall.table.n() == 0u);
  BOOST_TEST(!c->overall.ci);
  BOOST_TEST(c->overall.p_value == 1.0);
  BOOST_TEST(!c->regression());
  for (auto f : compare::formats) BOOST_TEST(!compare::render(*c, f).empty());

  c = compare::compare_runs(run("r1", {saved("e", "a", st::na), saved("e", "b", st::na)}),
                            run("r2", {saved("e", "a", st::na), saved("e", "b", st::skipped)}));
  BOOST_REQUIRE(c);
  BOOST_TEST(c->overall.table.n() == 0u);
  BOOST_TEST(c->not_scored == 2u);
  BOOST_TEST(c->count(change::unpaired) == 2u);
  BOOST_TEST(compare::render(*c, "table").find("no case was scored") != std::string::npos);

  auto other = compare::compare_runs(run("r1", {}), run("r2", {}, "another"));
  BOOST_REQUIRE(!other);
  BOOST_TEST((other.error().code == compare::errc::other_study));
  BOOST_TEST(other.error().message().find("'another'") != std::string::npos);
  auto bad_key = compare::compare_runs(run("r1", {saved("e", "a", st::passed)}),
                                       run("r2", {saved("e", "a", st::passed)}), {"nope", 0.05});
  BOOST_REQUIRE(!bad_key);
  BOOST_TEST((bad_key.error().code == compare::errc::unknown_group));
  // In the library's words: the option, not the command line's flag.
  BOOST_TEST(bad_key.error().message().find("group_by 'nope'") == 0u, bad_key.error().message());
  auto bad_alpha = compare::compare_runs(run("r1", {}), run("r2", {}), {"", 1.0});
  BOOST_REQUIRE(!bad_alpha);
  BOOST_TEST((bad_alpha.error().code == compare::errc::invalid_alpha));
}

BOOST_AUTO_TEST_CASE(refusals_are_codes_in_the_compare_category) {
  for (auto e :
       {compare::errc::other_study, compare::errc::invalid_alpha, compare::errc::unknown_group}) {
    boost::system::error_code ec = e;
    BOOST_TEST(ec.category().name() == std::string("mira.compare"));
    BOOST_TEST(ec.message() != "unknown compare error");
  }
}

BOOST_AUTO_TEST_CASE(every_format_escapes_study_names) {
  using st = case_state;
  const std::string evil = "<script>x</script>|\x1b[31m&\"";
  auto c = compare::compare_runs(run("r1", {saved(evil, "a", st::passed)}),
                                 run("r2", {saved(evil, "a", st::failed)}));
  BOOST_REQUIRE(c);
  auto html = compare::render(*c, "html");
  BOOST_TEST(html.find("<script") == std::string::npos);
  BOOST_TEST(html.find("Content-Security-Policy") != std::string::npos);
  BOOST_TEST(html.find("default-src 'none'") != std::string::npos);
  BOOST_TEST(html.find("script-src") == std::string::npos);  // the page has no script
  BOOST_TEST(html.find("<svg") != std::string::npos);
  auto junit = compare::render(*c, "junit");
  BOOST_TEST(junit.find("<script") == std::string::npos);
  BOOST_TEST(junit.find("\x1b") == std::string::npos);
  BOOST_TEST(junit.find("<failure") != std::string::npos);
  BOOST_TEST(compare::render(*c, "table").find("\x1b") == std::string::npos);
  BOOST_TEST(compare::render(*c, "md").find("\x1b") == std::string::npos);
  auto j = boost::json::parse(compare::render(*c, "json")).as_object();
  BOOST_TEST(j.at("regressions").as_array().size() == 1u);
  BOOST_TEST(j.at("regressions").as_array()[0].at("eval").as_string() == evil);
  BOOST_TEST(!compare::render(*c, "bogus", [](std::string_view) {}));
}

BOOST_AUTO_TEST_CASE(every_format_shows_a_group_row_with_the_same_cells_and_marks_a_drop) {
  using st = case_state;
  // Eval "e": six cases passed -> failed (p = 2 / 64, a significant drop); "f": nothing paired.
  std::vector<store::saved_case> base, cand;
  for (auto s : {"a", "b", "c", "d", "e", "f"}) {
    base.push_back(saved("e", s, st::passed));
    cand.push_back(saved("e", s, st::failed));
  }
  base.push_back(saved("f", "a", st::na));
  cand.push_back(saved("f", "a", st::na));
  auto c = compare::compare_runs(run("r1", base), run("r2", cand));
  BOOST_REQUIRE(c);
  auto table = compare::render(*c, "table");
  BOOST_TEST(table.find("  e     100.0%  0.0%    -100.0  [") != std::string::npos, table);
  BOOST_TEST(table.find("0.03125   6    0    6       0  DROP\n") != std::string::npos, table);
  BOOST_TEST(table.find("  f     –       –       –       –                 1         0    0    0 "
                        "      1\n") != std::string::npos,
             table);
  auto md = compare::render(*c, "md");
  BOOST_TEST(md.find("| e | 100.0% | 0.0% | -100.0 | [") != std::string::npos, md);
  BOOST_TEST(md.find("| 0.03125 | 6 | 0 | 6 | 0 | **drop** |\n") != std::string::npos, md);
  BOOST_TEST(md.find("| f | – | – | – | – | 1 | 0 | 0 | 0 | 1 |  |\n") != std::string::npos, md);
  auto html = compare::render(*c, "html");
  BOOST_TEST(html.find("<tr class=\"drop\"><th>e</th><td class=\"n\">100.0%</td><td "
                       "class=\"n\">0.0%</td><td class=\"n\">-100.0</td><td class=\"n\">[") !=
                 std::string::npos,
             html);
  BOOST_TEST(html.find("<td class=\"n\">0.03125</td><td class=\"n\">6</td><td class=\"n\">0</"
                       "td><td class=\"n\">6</td><td class=\"n\">0</td></tr>") != std::string::npos,
             html);
  BOOST_TEST(html.find("<tr><th>f</th><td class=\"n\">–</td>") != std::string::npos, html);
}

BOOST_AUTO_TEST_CASE(table_columns_line_up_when_a_cell_or_a_name_is_not_ascii) {
  using st = case_state;
  // "é" and the "–" of a group with nothing paired are two and three bytes but one column.
  auto c = compare::compare_runs(
      run("r1", {saved("caf\xc3\xa9", "a", st::passed), saved("plain", "a", st::na)}),
      run("r2", {saved("caf\xc3\xa9", "a", st::passed), saved("plain", "a", st::na)}));
  BOOST_REQUIRE(c);
  auto text = compare::render(*c, "table");
  auto block = text.substr(text.find("per eval:\n") + 10);
  std::vector<std::size_t> p_column;  // the column where "p" / the p-value starts on each line
  for (std::size_t at = 0; at < block.size() && block[at] != '\n';) {
    auto end = block.find('\n', at);
    auto line = block.substr(at, end - at);
    std::size_t col = 0, bytes = 0, spaces = 0;
    // The p column follows the CI column: the first cell after a run of 2+ spaces past 40.
    for (; bytes < line.size(); ++bytes) {
      bool lead = (static_cast<unsigned char>(line[bytes]) & 0xC0) != 0x80;
      if (!lead) continue;
      if (line[bytes] == ' ') {
        ++spaces;
      } else {
        if (col > 40 && spaces >= 2) break;
        spaces = 0;
      }
      ++col;
    }
    p_column.push_back(col);
    at = end + 1;
  }
  BOOST_REQUIRE(p_column.size() == 3u);  // header, café, plain
  BOOST_TEST(p_column[0] == p_column[1], text);
  BOOST_TEST(p_column[0] == p_column[2], text);
}

BOOST_AUTO_TEST_CASE(passed_to_error_is_a_regression_and_error_to_passed_no_fix) {
  using st = case_state;
  auto c =
      compare::compare_runs(run("r1", {saved("e", "a", st::passed), saved("e", "b", st::error),
                                       saved("e", "c", st::failed), saved("e", "d", st::passed)}),
                            run("r2", {saved("e", "a", st::error), saved("e", "b", st::passed),
                                       saved("e", "c", st::error), saved("e", "d", st::passed)}));
  BOOST_REQUIRE(c);
  BOOST_TEST(c->overall.table.regressed == 1u);  // a: passed -> error
  BOOST_TEST(c->overall.table.fixed == 0u);      // b: error -> passed stays unpaired
  BOOST_TEST(c->overall.table.both_pass == 1u);  // d
  BOOST_TEST(c->overall.table.n() == 2u);
  BOOST_TEST(c->not_scored == 2u);  // b, and c: failed -> error is no flip
  BOOST_REQUIRE_EQUAL(c->cases.size(), 4u);
  BOOST_TEST((c->cases[0].what == change::regressed));
  BOOST_TEST(c->cases[0].why() == "passed -> error");
  BOOST_TEST(c->cases[1].why() == "error -> passed");
  BOOST_TEST(c->cases[3].why() == "");
  auto j = boost::json::parse(compare::render(*c, "json")).as_object();
  BOOST_REQUIRE_EQUAL(j.at("regressions").as_array().size(), 1u);
  BOOST_TEST(j.at("regressions").as_array()[0].at("candidate").as_string() == "error");
  auto junit = compare::render(*c, "junit");
  BOOST_TEST(junit.find("message=\"passed in r1, error in r2\"") != std::string::npos, junit);
  BOOST_TEST(compare::render(*c, "table").find("e/a@t  (passed -> error)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_gate_fails_on_missing_cases_unless_allowed) {
  using st = case_state;
  std::vector<store::saved_case> base, cand;
  for (auto s : {"a", "b", "c", "d"}) base.push_back(saved("e", s, st::passed));
  cand.push_back(saved("e", "a", st::passed));
  cand.push_back(saved("e", "new", st::failed));  // only in the candidate: no matter
  auto c = compare::compare_runs(run("r1", base), run("r2", cand));
  BOOST_REQUIRE(c);
  BOOST_TEST(!c->gate.passed());
  BOOST_TEST(rule(*c, compare::gate_rule::missing).fired);
  BOOST_TEST(c->gate.summary() ==
             "failed: 3 baseline case(s) missing from the candidate (--allow-missing to accept)");
  for (auto r : {compare::gate_rule::regressions, compare::gate_rule::significant_drop,
                 compare::gate_rule::min_scored})
    BOOST_TEST(!rule(*c, r).fired, to_string(r));
  c = compare::compare_runs(run("r1", base), run("r2", cand),
                            {.group_by = "", .gate = {.allow_missing = true}});
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.passed());
  BOOST_TEST(rule(*c, compare::gate_rule::missing).detail ==
             "3 baseline case(s) missing from the candidate: accepted (--allow-missing)");
  // Unreadable records of the candidate are missing cases too.
  auto damaged = run("r2", base);
  damaged.cases.pop_back();
  damaged.unreadable.push_back("e/d@t: corrupt");
  c = compare::compare_runs(run("r1", base), damaged);
  BOOST_REQUIRE(c);
  BOOST_TEST(rule(*c, compare::gate_rule::missing).fired);
}

BOOST_AUTO_TEST_CASE(the_gate_fails_on_a_candidate_that_stopped_or_never_finished) {
  using st = case_state;
  std::vector<store::saved_case> cases{saved("e", "a", st::passed), saved("e", "b", st::passed)};
  auto stopped = run("r2", cases);
  stopped.meta.sessions.back().stopped = "interrupted";
  auto c = compare::compare_runs(run("r1", cases), stopped);
  BOOST_REQUIRE(c);
  BOOST_TEST(c->candidate_stopped == "interrupted");
  BOOST_TEST(c->gate.summary() ==
             "failed: the candidate run stopped before its end: interrupted (--allow-missing to "
             "accept)");
  // The summary says so when the session does not (written together by this host).
  auto by_summary = run("r2", cases);
  by_summary.meta.summary =
      boost::json::object{{"stopped", boost::json::object{{"reason", "deadline"}}}};
  c = compare::compare_runs(run("r1", cases), by_summary);
  BOOST_REQUIRE(c);
  BOOST_TEST(c->candidate_stopped == "deadline");
  // A last session without an end: killed, or still running; an earlier one does not count.
  auto killed = run("r2", cases);
  killed.meta.sessions.emplace_back().started = "2026-11-30T09:00:00Z";
  c = compare::compare_runs(run("r1", cases), killed);
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.summary() ==
             "failed: the candidate run never finished: killed, or still running "
             "(--allow-missing to accept)");
  c = compare::compare_runs(run("r1", cases), killed,
                            {.group_by = "", .gate = {.allow_missing = true}});
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.passed());
  // A stopped base is not the gate's business: its cases are what is compared against.
  c = compare::compare_runs(stopped, run("r2", cases));
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.passed());
}

BOOST_AUTO_TEST_CASE(the_gate_counts_regressions_beside_the_test) {
  using st = case_state;
  // 20 pairs, 5 passed -> failed: -25 pp but p = 2 / 2^5 = 0.0625, not significant at 0.05.
  std::vector<store::saved_case> base, cand;
  for (int i = 0; i < 20; ++i) {
    auto id = "s" + std::to_string(i);
    base.push_back(saved("e", id, st::passed));
    cand.push_back(saved("e", id, i < 5 ? st::failed : st::passed));
  }
  auto c = compare::compare_runs(run("r1", base), run("r2", cand));
  BOOST_REQUIRE(c);
  BOOST_TEST(c->overall.table.delta() == -0.25, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c->overall.p_value == 0.0625, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c->gate.passed(), c->gate.summary());
  BOOST_TEST(rule(*c, compare::gate_rule::regressions).detail ==
             "5 regression(s) (passed -> failed or error), no limit set (--max-regressions)");
  c = compare::compare_runs(run("r1", base), run("r2", cand),
                            {.group_by = "", .gate = {.max_regressions = 0}});
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.summary() ==
             "failed: 5 regression(s) (passed -> failed or error), more than --max-regressions 0");
  c = compare::compare_runs(run("r1", base), run("r2", cand),
                            {.group_by = "", .gate = {.max_regressions = 5}});
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.passed());
  // One more flip is significant: both rules fire.
  cand[5] = saved("e", "s5", st::failed);
  c = compare::compare_runs(run("r1", base), run("r2", cand),
                            {.group_by = "", .gate = {.max_regressions = 0}});
  BOOST_REQUIRE(c);
  BOOST_TEST(rule(*c, compare::gate_rule::regressions).fired);
  BOOST_TEST(rule(*c, compare::gate_rule::significant_drop).fired);
  BOOST_TEST(rule(*c, compare::gate_rule::significant_drop).detail ==
             "the pass rate dropped significantly: 6 regressed against 0 fixed, McNemar exact p = "
             "0.03125, below alpha 0.05");
}

BOOST_AUTO_TEST_CASE(the_gate_fails_when_too_few_or_no_cases_were_scored_in_both_runs) {
  using st = case_state;
  // Every case N/A or skipped in the candidate (a target unavailable): nothing compared.
  auto c =
      compare::compare_runs(run("r1", {saved("e", "a", st::passed), saved("e", "b", st::passed)}),
                            run("r2", {saved("e", "a", st::na), saved("e", "b", st::skipped)}));
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.summary() ==
             "failed: no case was scored (passed or failed) in both runs: nothing was compared");
  // min_scored 0 is 1: nothing compared is never a pass.
  c = compare::compare_runs(run("r1", {}), run("r2", {}),
                            {.group_by = "", .gate = {.min_scored = 0}});
  BOOST_REQUIRE(c);
  BOOST_TEST(rule(*c, compare::gate_rule::min_scored).fired);
  auto two = run("r1", {saved("e", "a", st::passed), saved("e", "b", st::failed)});
  c = compare::compare_runs(two, two, {.group_by = "", .gate = {.min_scored = 3}});
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.summary() ==
             "failed: 2 case(s) scored in both runs, fewer than --min-scored 3");
  c = compare::compare_runs(two, two, {.group_by = "", .gate = {.min_scored = 2}});
  BOOST_REQUIRE(c);
  BOOST_TEST(c->gate.passed());
  BOOST_TEST(c->gate.summary() == "passed");
}

BOOST_AUTO_TEST_CASE(every_format_says_which_rule_of_the_gate_fired) {
  using st = case_state;
  auto base = run("r1", {saved("e", "a", st::passed), saved("e", "b", st::passed)});
  auto cand = run("r2", {saved("e", "a", st::failed)});
  auto c = compare::compare_runs(base, cand, {.group_by = "", .gate = {.max_regressions = 0}});
  BOOST_REQUIRE(c);
  const std::string missing = "1 baseline case(s) missing from the candidate";
  const std::string regressions = "1 regression(s) (passed -> failed or error), more than";
  auto table = compare::render(*c, "table");
  BOOST_TEST(table.find("\ngate: failed: " + missing) != std::string::npos, table);
  BOOST_TEST(table.find(regressions) != std::string::npos, table);
  auto md = compare::render(*c, "md");
  BOOST_TEST(md.find("**Gate:** failed: " + missing) != std::string::npos, md);
  auto html = compare::render(*c, "html");
  BOOST_TEST(html.find("<b>fired</b> missing: " + missing) != std::string::npos, html);
  BOOST_TEST(html.find("<b>ok</b> significant_drop: ") != std::string::npos, html);
  auto j = boost::json::parse(compare::render(*c, "json")).as_object();
  auto& gate = j.at("gate").as_object();
  BOOST_TEST(!gate.at("passed").as_bool());
  auto& rules = gate.at("rules").as_array();
  BOOST_REQUIRE_EQUAL(rules.size(), 4u);
  const char* names[] = {"missing", "regressions", "significant_drop", "min_scored"};
  const bool fired[] = {true, true, false, false};
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST(rules[i].at("rule").as_string() == names[i]);
    BOOST_TEST(rules[i].at("fired").as_bool() == fired[i], names[i]);
  }
  BOOST_TEST(rules[0].at("missing").as_int64() == 1);
  BOOST_TEST(rules[0].at("candidate_stopped").is_null());
  BOOST_TEST(rules[1].at("regressions").as_int64() == 1);
  BOOST_TEST(rules[1].at("max").as_int64() == 0);
  BOOST_TEST(rules[3].at("scored").as_int64() == 1);
  auto junit = compare::render(*c, "junit");
  BOOST_TEST(junit.find("<testcase classname=\"gate\" name=\"missing\"><failure message=\"" +
                        missing) != std::string::npos,
             junit);
  BOOST_TEST(junit.find("<testcase classname=\"gate\" name=\"significant_drop\"><system-out>") !=
                 std::string::npos,
             junit);
  // Four gate testcases and one paired case; the two fired rules and the regression fail.
  BOOST_TEST(junit.find("tests=\"5\" failures=\"3\"") != std::string::npos, junit);
}

BOOST_AUTO_TEST_CASE(junit_names_its_suite_by_the_study_and_md_has_the_run_reports_levels) {
  using st = case_state;
  auto c = compare::compare_runs(run("20261130T081502Z-3fa9", {saved("e", "a", st::passed)}),
                                 run("20261201T091200Z-77c1", {saved("e", "a", st::failed)}));
  BOOST_REQUIRE(c);
  auto junit = compare::render(*c, "junit");
  // The same suite every run: test-history tools key suites by name.
  BOOST_TEST(junit.find("<testsuite name=\"compare s\" ") != std::string::npos, junit);
  BOOST_TEST(
      junit.find("<property name=\"base\" value=\"20261130T081502Z-3fa9\"/>") != std::string::npos,
      junit);
  BOOST_TEST(junit.find("<property name=\"candidate\" value=\"20261201T091200Z-77c1\"/>") !=
                 std::string::npos,
             junit);
  // One "##" title, "###" sections: the levels of the run's Markdown report.
  auto md = compare::render(*c, "md");
  BOOST_TEST(md.rfind("## Comparison of s\n", 0) == 0u, md);
  for (std::size_t at = 0; (at = md.find('#', at)) != std::string::npos;) {
    const bool line_start = at == 0 || md[at - 1] == '\n';
    auto hashes = md.find_first_not_of('#', at) - at;
    if (line_start) BOOST_TEST((hashes == 3 || at == 0), md.substr(at, 40));
    at += hashes;
  }
  BOOST_TEST(md.find("\n### Per eval\n") != std::string::npos, md);
  BOOST_TEST(md.find("\n### Regressed (passed → failed or error)\n") != std::string::npos, md);
}

BOOST_AUTO_TEST_SUITE_END()
