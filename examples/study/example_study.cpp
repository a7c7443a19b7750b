// An example study: a complete Mira Eval Protocol peer written against Boost.JSON only, to show
// what a study does and to give the host something real to run. Each `run` gets its own thread,
// so many cases are in flight at once; `cancel` stops a running case.
//
// Besides `run` it answers `execute` (the transcript; greet's carries an ATIF trajectory) and
// `score` (the same scorers over a supplied transcript).
//
// Evals: greet (a target marked unavailable), arithmetic (25 samples over paginated pages),
// reasoning (an `effort` axis), coin (3 seeded trials), slow (sleeps, honours cancel),
// events (emits event/log notifications), outage (an infra error scored N/A).
//
// Options: --slow-ms N (how long `slow` sleeps, default 200), --no-cancel (do not advertise
// `cancel`).
#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace json = boost::json;

namespace {

int slow_ms = 200;
bool advertise_cancel = true;

std::mutex out_mutex;
void send(const json::value& v) {
  std::string line = json::serialize(v);
  line += '\n';
  std::lock_guard lock(out_mutex);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

void reply(const json::value& id, json::value result) {
  send(json::object{{"id", id}, {"result", std::move(result)}});
}

void reply_error(const json::value& id, int code, std::string_view message) {
  send(json::object{{"id", id}, {"error", json::object{{"code", code}, {"message", message}}}});
}

constexpr int arithmetic_samples = 25;
constexpr int page_size = 10;

json::array arithmetic_page(int from) {
  json::array samples;
  for (int i = from; i < from + page_size && i < arithmetic_samples; ++i)
    samples.push_back(
        json::object{{"id", "case-" + std::to_string(i)},
                     {"metadata", json::object{{"difficulty", i % 3 == 0 ? "hard" : "easy"}}}});
  return samples;
}

json::value next_cursor(int from) {
  return from + page_size < arithmetic_samples ? json::value(std::to_string(from + page_size))
                                               : json::value(nullptr);
}

json::object sim_target() {
  return {{"label", "sim"}, {"provider", "sim"}, {"available", true}};
}

json::object list_result() {
  json::array evals;
  evals.push_back(json::object{
      {"name", "greet"},
      {"description", "Greets the user and reports the answer"},
      {"samples", json::array{json::object{{"id", "hi"}, {"tags", json::array{"smoke"}}},
                              json::object{{"id", "hello"}, {"tags", json::array{"smoke"}}},
                              json::object{{"id", "hey"}}}},
      {"scorers", json::array{"contains(\"42\")"}},
      {"targets", json::array{sim_target(),
                              json::object{{"label", "anthropic/claude-opus"},
                                           {"provider", "anthropic"},
                                           {"available", false},
                                           {"metadata", json::object{{"price_tier", "premium"}}}}}},
      {"metadata", json::object{{"suite", "smoke"}}}});
  evals.push_back(json::object{{"name", "arithmetic"},
                               {"description", "Adds two numbers (paginated dataset)"},
                               {"samples", arithmetic_page(0)},
                               {"next_cursor", next_cursor(0)},
                               {"scorers", json::array{"exact"}},
                               {"targets", json::array{sim_target()}}});
  evals.push_back(json::object{
      {"name", "reasoning"},
      {"description", "Solves a puzzle at a chosen effort"},
      {"samples", json::array{json::object{{"id", "puzzle-1"}}, json::object{{"id", "puzzle-2"}}}},
      {"scorers", json::array{"succeeded"}},
      {"targets", json::array{sim_target()}},
      {"axes",
       json::array{json::object{{"name", "effort"}, {"values", json::array{"low", "high"}}}}},
      {"max_turns", 4}});
  evals.push_back(json::object{{"name", "coin"},
                               {"description", "A seeded stochastic subject, repeated"},
                               {"samples", json::array{json::object{{"id", "flip"}}}},
                               {"scorers", json::array{"seeded"}},
                               {"targets", json::array{sim_target()}},
                               {"trials", 3},
                               {"seed", 42}});
  evals.push_back(json::object{{"name", "slow"},
                               {"description", "Takes a while; honours cancel"},
                               {"samples", json::array{json::object{{"id", "long-task"}}}},
                               {"scorers", json::array{"succeeded"}},
                               {"targets", json::array{sim_target()}}});
  evals.push_back(json::object{{"name", "events"},
                               {"description", "Streams progress events while it runs"},
                               {"samples", json::array{json::object{{"id", "tool-use"}}}},
                               {"scorers", json::array{"succeeded"}},
                               {"targets", json::array{sim_target()}}});
  evals.push_back(json::object{{"name", "outage"},
                               {"description", "The provider is down: an infra error, N/A"},
                               {"samples", json::array{json::object{{"id", "provider-503"}}}},
                               {"scorers", json::array{"succeeded"}},
                               {"targets", json::array{sim_target()}}});
  return {{"evals", std::move(evals)}};
}

struct running {
  std::atomic<bool> cancelled{false};
};
std::mutex runs_mutex;
std::map<std::int64_t, std::shared_ptr<running>> runs;
std::condition_variable runs_done;  // signalled when `runs` becomes empty

std::string str(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

json::object transcript(std::string final_response, std::int64_t in, std::int64_t out,
                        std::int64_t duration_ms) {
  return {{"final_response", std::move(final_response)},
          {"iterations", 1},
          {"tool_calls_count", 0},
          {"usage", json::object{{"input_tokens", in},
                                 {"output_tokens", out},
                                 {"cost_usd", 0.00001 * static_cast<double>(in + out)}}},
          {"timing", json::object{{"duration_ms", duration_ms}}}};
}

json::object score(std::string_view scorer, bool pass, std::string_view reason) {
  return {{"scorer", scorer}, {"value", pass ? 1.0 : 0.0}, {"pass", pass}, {"reason", reason}};
}

// Echoes the case identity into a result, as the spec asks.
json::object identity(const json::object& params) {
  json::object r;
  for (auto key : {"eval", "sample", "target", "params", "trial", "trials", "seed"})
    if (auto* v = params.if_contains(key)) r[key] = *v;
  return r;
}

void finish(json::object& r, json::array scores, json::object t) {
  bool passed = !scores.empty();
  double sum = 0;
  int counted = 0;
  for (auto& s : scores) {
    auto& so = s.as_object();
    if (so.contains("na") && so.at("na").as_bool()) continue;
    ++counted;
    sum += so.at("value").to_number<double>();
    passed = passed && so.at("pass").as_bool();
  }
  r["passed"] = passed && counted > 0;
  r["aggregate"] = counted ? sum / counted : 0.0;
  r["scores"] = std::move(scores);
  r["transcript"] = std::move(t);
  r["skipped"] = false;
}

void emit_event(std::int64_t request_id, const json::object& params, std::string_view kind,
                json::object extra = {}) {
  json::object p{{"request_id", request_id},
                 {"eval", str(params, "eval")},
                 {"sample", str(params, "sample")},
                 {"target", str(params, "target")},
                 {"kind", kind}};
  for (auto& kv : extra) p[kv.key()] = kv.value();
  send(json::object{{"method", "event"}, {"params", std::move(p)}});
}

// What the subject did for one case: its transcript, or nothing when an error reply (unknown
// eval or sample, cancelled) has been sent instead. Shared by `run` and `execute`.
std::optional<json::object> execute_case(const json::value& id, const json::object& params,
                                         const running& state) {
  auto rid = id.as_int64();
  auto eval = str(params, "eval");
  auto sample = str(params, "sample");
  json::object t;
  if (eval == "greet") {
    if (sample != "hi" && sample != "hello" && sample != "hey") {
      reply_error(id, -32602, "no such sample: greet/" + sample);
      return std::nullopt;
    }
    t = transcript("Hi! The answer is 42.", 12, 8, 3);
  } else if (eval == "arithmetic") {
    auto n = std::stoi(sample.substr(sample.find('-') + 1));
    t = transcript(std::to_string(2 * n), 20, 2, 1);
  } else if (eval == "reasoning") {
    auto* p = params.if_contains("params");
    std::string effort = p && p->is_object() ? str(p->as_object(), "effort") : "low";
    t = transcript("solved at " + effort + " effort", 40, effort == "high" ? 200 : 50, 2);
    t["iterations"] = effort == "high" ? 3 : 1;
    t["metrics"] = json::object{{"steps_per_turn", effort == "high" ? 2.5 : 1.0}};
  } else if (eval == "coin") {
    auto* s = params.if_contains("seed");
    std::int64_t seed = s && s->is_int64() ? s->as_int64() : 0;
    t = transcript(seed % 5 != 0 ? "heads" : "tails", 5, 1, 1);
  } else if (eval == "slow") {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(slow_ms);
    while (std::chrono::steady_clock::now() < until) {
      if (state.cancelled) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    t = transcript("done", 10, 10, slow_ms);
  } else if (eval == "events") {
    emit_event(rid, params, "started");
    emit_event(rid, params, "turn", {{"turn", 0}});
    emit_event(rid, params, "tool_call", {{"tool", "search"}});
    emit_event(rid, params, "output", {{"text", "found it"}});
    send(json::object{{"method", "log"},
                      {"params", json::object{{"request_id", rid}, {"message", "used one tool"}}}});
    emit_event(rid, params, "finished");
    t = transcript("found it", 30, 6, 2);
    t["tool_calls_count"] = 1;
    t["tool_calls"] = json::array{"search"};
  } else if (eval == "outage") {
    t = transcript("", 0, 0, 1);
    t["error"] = "provider returned 503 Service Unavailable";
    t["error_kind"] = "infra";
  } else {
    reply_error(id, -32602, "no such eval: " + eval);
    return std::nullopt;
  }
  if (state.cancelled) {
    std::fprintf(stderr, "example-study: run %lld cancelled\n", static_cast<long long>(rid));
    reply_error(id, -32800, "cancelled");
    return std::nullopt;
  }
  return t;
}

// The eval's scorers over a transcript (from this run, or replayed by `score`).
json::array score_case(json::object& r, const json::object& params, const json::object& t) {
  auto eval = str(params, "eval");
  auto sample = str(params, "sample");
  auto response = str(t, "final_response");
  if (eval == "greet") {
    bool found = response.find("42") != std::string::npos;
    return {score("contains", found, found ? "found \"42\"" : "no \"42\" in the answer")};
  }
  if (eval == "arithmetic") {
    auto n = std::stoi(sample.substr(sample.find('-') + 1));
    r["input"] = json::array{"What is " + std::to_string(n) + " + " + std::to_string(n) + "?"};
    r["expected"] = std::to_string(2 * n);
    bool exact = response == std::to_string(2 * n);
    return {score("exact", exact, exact ? "matched" : "expected " + std::to_string(2 * n))};
  }
  if (eval == "coin") {
    bool heads = response == "heads";
    return {score("seeded", heads, heads ? "heads" : "tails")};
  }
  if (eval == "outage" && str(t, "error_kind") == "infra") {
    json::object na = score("infra", false, str(t, "error"));
    na["na"] = true;
    return {na};
  }
  if (eval == "events") {
    auto* n = t.if_contains("tool_calls_count");
    bool used = n && n->is_int64() && n->as_int64() >= 1;
    return {score("succeeded", used, used ? "used the tool" : "no tool call")};
  }
  bool ok = !response.empty();
  return {score("succeeded", ok, ok ? "answered" : "no answer")};
}

void run_case(json::value id, json::object params, std::shared_ptr<running> state) {
  auto t = execute_case(id, params, *state);
  if (!t) return;
  json::object r = identity(params);
  auto scores = score_case(r, params, *t);
  finish(r, std::move(scores), std::move(*t));
  reply(id, std::move(r));
}

// `execute`: the full transcript; greet also carries an ATIF trajectory.
void execute(json::value id, json::object params, std::shared_ptr<running> state) {
  auto t = execute_case(id, params, *state);
  if (!t) return;
  if (str(params, "eval") == "greet")
    (*t)["trajectory"] = json::object{
        {"schema_version", "ATIF-v1.7"},
        {"agent", json::object{{"name", "example-study"}, {"version", "0.1.0"}}},
        {"steps", json::array{json::object{{"step_id", 1},
                                           {"source", "user"},
                                           {"message", "Say hello, " + str(params, "sample")}},
                              json::object{{"step_id", 2},
                                           {"source", "agent"},
                                           {"message", "Hi! The answer is 42."},
                                           {"metrics", json::object{{"prompt_tokens", 12},
                                                                    {"completion_tokens", 8}}}}}}};
  (*t)["events"] = json::array{};
  (*t)["files"] = json::object{};
  json::object r = identity(params);
  r["transcript"] = std::move(*t);
  r["skipped"] = false;
  reply(id, std::move(r));
}

// `score`: the same scorers over a supplied transcript; the result carries its summary.
void score_transcript(const json::value& id, const json::object& params) {
  auto* tv = params.if_contains("transcript");
  if (!tv || !tv->is_object()) return reply_error(id, -32602, "score needs a transcript object");
  json::object t = tv->as_object();
  for (auto key : {"trajectory", "events", "files"}) t.erase(key);
  json::object r = identity(params);
  auto scores = score_case(r, params, t);
  finish(r, std::move(scores), std::move(t));
  reply(id, std::move(r));
}

template <class Work>
void in_flight(const json::value& id, json::object params, Work work) {
  auto state = std::make_shared<running>();
  {
    std::lock_guard lock(runs_mutex);
    runs[id.as_int64()] = state;
  }
  std::thread([id, params = std::move(params), state, work] {
    work(id, params, state);
    std::lock_guard lock(runs_mutex);
    runs.erase(id.as_int64());
    if (runs.empty()) runs_done.notify_all();
  }).detach();
}

void handle(json::object msg) {
  auto* idp = msg.if_contains("id");
  auto* mp = msg.if_contains("method");
  if (!idp || !mp || !mp->is_string()) return;
  json::value id = *idp;
  std::string method(mp->get_string());
  json::object params;
  if (auto* p = msg.if_contains("params"); p && p->is_object()) params = p->as_object();

  if (method == "initialize") {
    json::array caps{"axes",     "events",  "usage", "trials",
                     "paginate", "execute", "score", "trajectory"};
    if (advertise_cancel) caps.push_back("cancel");
    reply(id, json::object{
                  {"protocol_version", "1.1"},
                  {"study", "example-study"},
                  {"study_version", "0.1.0"},
                  {"evals", 7},
                  {"capabilities", std::move(caps)},
                  {"capability_params",
                   json::object{
                       {"events", json::object{{"kinds", json::array{"started", "turn", "tool_call",
                                                                     "output", "finished"}}}},
                       {"trajectory", json::object{{"format", "ATIF"}, {"version", "1.7"}}}}}});
  } else if (method == "list") {
    reply(id, list_result());
  } else if (method == "list_samples") {
    if (str(params, "eval") != "arithmetic")
      return reply_error(id, -32602, "eval has no more pages");
    int from = 0;
    try {
      from = std::stoi(str(params, "cursor"));
    } catch (...) {
      return reply_error(id, -32602, "bad cursor");
    }
    reply(id, json::object{{"samples", arithmetic_page(from)}, {"next_cursor", next_cursor(from)}});
  } else if (method == "run") {
    in_flight(id, std::move(params), run_case);
  } else if (method == "execute") {
    in_flight(id, std::move(params), execute);
  } else if (method == "score") {
    score_transcript(id, params);
  } else if (method == "cancel" && advertise_cancel) {
    auto* target = params.if_contains("id");
    bool found = false;
    if (target && target->is_int64()) {
      std::lock_guard lock(runs_mutex);
      if (auto it = runs.find(target->as_int64()); it != runs.end()) {
        it->second->cancelled = true;
        found = true;
      }
    }
    reply(id, json::object{{"cancelled", found}});
  } else {
    reply_error(id, -32601, "unknown method: " + method);
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--slow-ms") && i + 1 < argc)
      slow_ms = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-cancel"))
      advertise_cancel = false;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (ec || !v.is_object()) {
      send(json::object{{"method", "log"},
                        {"params", json::object{{"message", "unparseable request skipped"}}}});
      continue;
    }
    handle(std::move(v.as_object()));
  }
  // EOF: finish what is in flight, then exit.
  std::unique_lock lock(runs_mutex);
  runs_done.wait(lock, [] { return runs.empty(); });
  return 0;
}
