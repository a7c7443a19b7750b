// Merging shard runs: a complete set becomes one run with every record and the shards' timing;
// each kind of bad input is refused with nothing written and the inputs untouched; a partial
// set merges only when allowed. Also the plan fingerprint and meta.json's "shard".
#include <mira/plan/shard.hpp>
#include <mira/report/render.hpp>
#include <mira/store/files.hpp>
#include <mira/store/merge.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>

#include "common/temp_dir.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <set>
#include <sstream>

using namespace mira::store;
using mira::schedule::case_state;
namespace fs = std::filesystem;
namespace json = boost::json;
namespace plan = mira::plan;

namespace {

plan::plan echo_plan(std::size_t n, const std::string& prefix = "s") {
  plan::plan p;
  for (std::size_t i = 0; i < n; ++i) {
    plan::planned_case c;
    c.params.eval = "echo";
    c.params.sample = prefix + std::to_string(i);
    c.params.target = "sim";
    c.key = plan::case_key(c.params);
    p.cases.push_back(std::move(c));
  }
  return p;
}

struct shard_run_options {
  std::string study_version = "1";
  std::size_t saved_of_shard = SIZE_MAX;  // save only the first N cases of the shard
  mira::store::layout kind = mira::store::layout::per_case;
  bool keys = true;  // the session saves its plan's keys (a host before #36 did not)
};

// A shard run as `mira run --shard I/N` saves it, every case passed.
fs::path save_shard(const fs::path& dir, const std::string& id, const plan::plan& whole,
                    plan::shard_spec spec, const shard_run_options& o = {}) {
  auto store = run_store::create(dir, id, o.kind);
  BOOST_REQUIRE(store.has_value());
  auto part = plan::select_shard(whole, spec);
  auto& meta = store->meta();
  meta.study = "echo-study";
  meta.study_version = o.study_version;
  meta.initialize = json::object{{"study", "echo-study"}, {"study_version", o.study_version}};
  set_shard(meta, {spec, plan_fingerprint(whole, {}), whole.cases.size(), part.cases.size()});
  session_entry s;
  s.seconds = 1.5;
  s.planned = part.cases.size();
  BOOST_REQUIRE(!store->begin_session(s, o.keys ? keys_of(part.cases) : plan_keys{}));
  store->append_event(R"({"key":"x","method":"event"})");
  BOOST_REQUIRE(!store->append_stderr("shard " + std::to_string(spec.index) + " says hi\n"));
  auto w = store->writer();
  BOOST_REQUIRE(w.has_value());
  mira::schedule::run_report report;
  plan::plan saved;
  for (std::size_t i = 0; i < part.cases.size() && i < o.saved_of_shard; ++i) {
    mira::schedule::case_record r;
    r.state = case_state::passed;
    r.attempts = 1;
    (*w)->submit(part.cases[i].key, case_line(part.cases[i], r), [](auto) {});
    saved.cases.push_back(part.cases[i]);
    report.cases.push_back(r);
  }
  (*w)->drain();
  store->session().seconds = 1.5;
  BOOST_REQUIRE(!mira::report::finish_run(*store, saved, report,
                                          mira::aggregate::summarize(saved, report.cases)));
  return dir / id;
}

// Every file under `dir` with its contents: what "nothing written, nothing changed" compares.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) {
      out[e.path().string()] = "<dir>";
      continue;
    }
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    out[e.path().string()] = ss.str();
  }
  return out;
}

struct fixture {
  mira::test::temp_dir tmp;
  fs::path shards = tmp.path / "shards";
  fs::path results = tmp.path / "results";
  plan::plan whole = echo_plan(30);
  std::vector<fs::path> runs;
  fixture() {
    for (std::size_t i = 0; i < 3; ++i)
      runs.push_back(save_shard(shards, "shard-" + std::to_string(i), whole, {i, 3}));
  }
  merge_options options(bool partial = false) {
    merge_options o;
    o.report_files = mira::report::saved_run_files;
    o.results_dir = results;
    o.run_id = "merged";
    o.allow_partial = partial;
    return o;
  }
  // Refused with `code`, naming `text`, with nothing written and the inputs as they were.
  void refused(const std::vector<fs::path>& inputs, boost::system::error_code code,
               const std::string& text, const merge_options& o) {
    auto before = snapshot(tmp.path);
    auto r = merge_runs(inputs, o);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().code == code, r.error().code.message());
    BOOST_TEST(r.error().message().find(text) != std::string::npos, r.error().message());
    BOOST_TEST((snapshot(tmp.path) == before));
  }
  void refused(const std::vector<fs::path>& inputs, boost::system::error_code code,
               const std::string& text) {
    refused(inputs, code, text, options());
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(store_merge)

BOOST_AUTO_TEST_CASE(the_fingerprint_covers_the_keys_in_any_order_and_the_selection) {
  auto p = echo_plan(5);
  auto q = p;
  std::vector<std::size_t> backwards;
  for (auto i = p.cases.size(); i-- > 0;) backwards.push_back(i);
  q.cases = p.cases.subset(backwards);
  BOOST_TEST(plan_fingerprint(p, {}) == plan_fingerprint(q, {}));
  BOOST_TEST(plan_fingerprint(p, {}).size() == 64u);
  BOOST_TEST(plan_fingerprint(p, {}) != plan_fingerprint(echo_plan(6), {}));
  plan::selection seeded;
  seeded.seed = 7;
  BOOST_TEST(plan_fingerprint(p, {}) != plan_fingerprint(p, seeded));
}

BOOST_AUTO_TEST_CASE(meta_json_keeps_the_shard_and_a_malformed_one_is_an_error) {
  run_meta m;
  m.run_id = "r";
  BOOST_TEST(!shard_of(m).value().has_value());
  set_shard(m, {{2, 4}, "abc", 40, 10});
  auto back = run_meta::from_json(m.to_json());
  BOOST_REQUIRE(back.has_value());
  auto s = shard_of(*back).value();
  BOOST_REQUIRE(s.has_value());
  BOOST_TEST((s->spec == plan::shard_spec{2, 4}));
  BOOST_TEST(s->fingerprint == "abc");
  BOOST_TEST(s->plan_cases == 40u);
  BOOST_TEST(s->shard_cases == 10u);
  m.extra["shard"] = json::object{{"index", 4}, {"count", 4}, {"fingerprint", "x"}};
  BOOST_TEST((shard_of(m).error().code == errc::corrupt));
  BOOST_TEST(shard_of(m).error().message().find("not below its count") != std::string::npos);
  m.extra["shard"] = "2/4";
  BOOST_TEST(!shard_of(m).has_value());
}

BOOST_FIXTURE_TEST_CASE(complete_shards_merge_into_one_run, fixture) {
  auto before = snapshot(shards);
  auto r = merge_runs({runs[2], runs[0], runs[1]}, options());
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->complete());
  BOOST_TEST(r->cases == 30u);
  BOOST_TEST(r->path == results / "merged");
  BOOST_TEST((snapshot(shards) == before));  // the inputs are only read
  auto merged = load_run(results, "merged");
  BOOST_REQUIRE(merged.has_value());
  BOOST_TEST(merged->meta.run_id == "merged");
  BOOST_TEST(merged->meta.study_version == "1");
  std::set<std::string> keys, expected;
  for (auto& c : merged->cases) keys.insert(c.key);
  for (const auto& c : whole.cases) expected.insert(c.key);
  BOOST_TEST((keys == expected));
  auto& info = merged->meta.extra.at("merged").as_object();
  BOOST_TEST(info.at("count").as_int64() == 3);
  BOOST_TEST(info.at("shards").as_array().size() == 3u);
  BOOST_TEST(info.at("shards").at(1).at("index").as_int64() == 1);
  BOOST_TEST(info.at("shards").at(1).at("seconds").as_double() == 1.5);
  // Three shard sessions and the merge's.
  BOOST_TEST(merged->meta.sessions.size() == 4u);
  BOOST_TEST(merged->meta.seconds() == 4.5);
  auto files = snapshot(results / "merged");
  auto report = json::parse(files.at((results / "merged" / "report.json").string()));
  BOOST_TEST(report.at("records").at("count").as_int64() == 30);
  BOOST_TEST(fs::exists(results / "merged" / "report.html"));
  auto stderr_log = files.at((results / "merged" / "study.stderr.log").string());
  BOOST_TEST(stderr_log.find("--- shard 1 (run shard-1) ---") != std::string::npos);
  BOOST_TEST(stderr_log.find("shard 2 says hi") != std::string::npos);
  auto events = files.at((results / "merged" / "events.ndjson").string());
  BOOST_TEST(events.find(R"({"shard":0,"run_id":"shard-0"})") != std::string::npos);
  // No temporary folder is left beside it.
  BOOST_TEST(std::distance(fs::directory_iterator(results), fs::directory_iterator()) == 1);
}

// The merged run's plan is its shards' plans together: a record lost from it is named by key
// (#36). A shard saved without its plan's keys, or one left out, leaves the merged run counting
// its missing cases only.
BOOST_FIXTURE_TEST_CASE(a_merged_run_names_a_lost_record_by_its_shards_keys, fixture) {
  BOOST_REQUIRE(merge_runs(runs, options()).has_value());
  const auto lost = whole.cases.key(7);
  fs::remove_all(results / "merged" / "cases" / encode_key(lost));
  auto r = run_reader::open(results, "merged");
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(r->plan_keys_problem().empty(), r->plan_keys_problem());
  BOOST_REQUIRE(r->missing().has_value());
  BOOST_TEST(r->missing()->count == 1u);
  BOOST_TEST((r->missing()->first == std::vector<std::string>{lost}));
  BOOST_TEST(completeness_of(*r).unfinished() == 1u);

  auto keyless = save_shard(tmp.path / "keyless", "keyless-1", whole, {1, 3}, {.keys = false});
  auto o = options(true);
  for (auto& [id, inputs] : {std::pair{"without-keys", std::vector{runs[0], keyless, runs[2]}},
                             std::pair{"partial", std::vector{runs[0], runs[2]}}}) {
    o.run_id = id;
    BOOST_REQUIRE(merge_runs(inputs, o).has_value());
    BOOST_TEST(!fs::exists(results / id / "plan-keys.ndjson"));
    auto counted = run_reader::open(results, id);
    BOOST_REQUIRE(counted.has_value());
    BOOST_TEST(!counted->missing().has_value());
  }
}

BOOST_FIXTURE_TEST_CASE(shards_of_either_layout_merge, fixture) {
  auto compact =
      save_shard(tmp.path / "compact", "compact-0", whole, {0, 3}, {.kind = layout::compact});
  auto r = merge_runs({compact, runs[1], runs[2]}, options());
  BOOST_REQUIRE(r.has_value());
  auto merged = load_run(results, "merged");
  BOOST_REQUIRE(merged.has_value());
  BOOST_TEST(merged->cases.size() == 30u);
  BOOST_TEST(merged->unreadable.empty());
  BOOST_TEST(to_string(merged->meta.layout) == "compact");  // the first input's
}

BOOST_FIXTURE_TEST_CASE(a_shard_given_twice_is_refused, fixture) {
  auto again = save_shard(shards, "shard-1-again", whole, {1, 3});
  refused({runs[0], runs[1], again, runs[2]}, merge_errc::duplicate, "shard 1 is given twice");
}

BOOST_FIXTURE_TEST_CASE(another_count_is_refused, fixture) {
  auto other = save_shard(tmp.path / "other", "of-4", whole, {2, 4});
  refused({runs[0], runs[1], other}, merge_errc::mismatched, "different counts");
}

BOOST_FIXTURE_TEST_CASE(another_study_version_is_refused, fixture) {
  auto other = save_shard(tmp.path / "other", "v2", whole, {2, 3}, {.study_version = "2"});
  refused({runs[0], runs[1], other}, merge_errc::mismatched, "version 2");
}

BOOST_FIXTURE_TEST_CASE(a_folder_from_another_plan_is_refused, fixture) {
  auto other = save_shard(tmp.path / "other", "other-plan", echo_plan(31), {2, 3});
  refused({runs[0], runs[1], other}, merge_errc::mismatched, "comes from another plan");
}

BOOST_FIXTURE_TEST_CASE(a_case_in_two_shards_is_refused, fixture) {
  // A hand-made shard 2 that also holds a case of shard 0 (same plan, same fingerprint).
  auto dir = tmp.path / "bad";
  auto bad = save_shard(dir, "overlap", whole, {2, 3});
  auto shard0 = plan::select_shard(whole, {0, 3});
  mira::schedule::case_record r;
  r.state = case_state::failed;
  fs::create_directories(bad / "cases" / encode_key(shard0.cases[0].key));
  std::ofstream(bad / "cases" / encode_key(shard0.cases[0].key) / "result.json")
      << case_line(shard0.cases[0], r) << "\n";
  refused({runs[0], runs[1], bad}, merge_errc::duplicate, "case " + shard0.cases[0].key + " is in");
}

BOOST_FIXTURE_TEST_CASE(a_run_that_is_not_a_shard_is_refused, fixture) {
  auto store = run_store::create(tmp.path / "plain", "plain", layout::per_case);
  BOOST_REQUIRE(store.has_value());
  BOOST_REQUIRE(!store->begin_session({}));
  refused({runs[0], tmp.path / "plain" / "plain"}, merge_errc::not_a_shard, "is not a shard run");
  // An input the store cannot open keeps the store's code.
  refused({runs[0], tmp.path / "nowhere" / "run"}, errc::not_found, "no saved run");
  refused({}, merge_errc::no_inputs, "no runs");
}

BOOST_FIXTURE_TEST_CASE(missing_shards_are_refused_naming_them, fixture) {
  refused({runs[1]}, merge_errc::incomplete, "shard(s) 0, 2 of 3 are missing");
}

BOOST_FIXTURE_TEST_CASE(an_unfinished_shard_is_refused, fixture) {
  auto partial = save_shard(tmp.path / "p", "partial", whole, {2, 3}, {.saved_of_shard = 3});
  refused({runs[0], runs[1], partial}, merge_errc::incomplete, "saved 3 of");
}

BOOST_FIXTURE_TEST_CASE(a_taken_or_invalid_run_id_is_refused, fixture) {
  fs::create_directories(results / "merged");
  refused(runs, errc::exists, "exists");
  auto o = options();
  o.run_id = "../escape";
  refused(runs, errc::invalid_id, "run id", o);
}

BOOST_FIXTURE_TEST_CASE(allow_partial_merges_what_is_there, fixture) {
  auto partial = save_shard(tmp.path / "p", "partial", whole, {2, 3}, {.saved_of_shard = 3});
  auto r = merge_runs({runs[0], partial}, options(true));
  BOOST_REQUIRE(r.has_value());
  BOOST_TEST(!r->complete());
  BOOST_TEST((r->info.missing == std::vector<std::size_t>{1}));
  const auto shard0 = plan::select_shard(whole, {0, 3}).cases.size();
  BOOST_TEST(r->cases == shard0 + 3);
  BOOST_TEST(r->info.not_run == 30 - shard0 - 3);
  BOOST_TEST(r->incomplete.size() == 1u);
  auto merged = load_run(results, "merged");
  BOOST_REQUIRE(merged.has_value());
  BOOST_TEST(merged->cases.size() == r->cases);
  BOOST_TEST(merged->meta.extra.at("merged").at("missing").as_array().size() == 1u);
}

BOOST_AUTO_TEST_CASE(refusals_are_codes_in_the_merge_category) {
  for (auto e : {merge_errc::no_inputs, merge_errc::not_a_shard, merge_errc::mismatched,
                 merge_errc::duplicate, merge_errc::incomplete, merge_errc::cannot_write}) {
    boost::system::error_code ec = e;
    BOOST_TEST(ec.category().name() == std::string("mira.store.merge"));
    BOOST_TEST(ec.message() != "unknown merge error");
    BOOST_TEST((ec != errc::corrupt));
  }
}

BOOST_AUTO_TEST_SUITE_END()
