// GET /v1/runs/{id}/cases as pages, and one case whole (case_pages.hpp).
#include "serve/case_pages.hpp"

#include <mira/schedule/results.hpp>

#include <boost/json/value_from.hpp>

#include <algorithm>
#include <array>
#include <charconv>

namespace mira::serve {

namespace json = boost::json;

namespace {

api_error bad_parameter(const std::string& name, std::string why) {
  return make_error(400, "invalid_parameter", name + ": " + std::move(why),
                    json::object{{"parameter", name}});
}

std::vector<std::string> split_list(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    auto comma = v.find(',');
    if (auto item = v.substr(0, comma); !item.empty()) out.emplace_back(item);
    v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
  }
  return out;
}

template <class T>
std::optional<T> parse_number(std::string_view v) {
  T n{};
  auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size()) return std::nullopt;
  return n;
}

// A page's `limit`: the same bound for every paged route.
tl::expected<std::size_t, api_error> page_limit(std::string_view v) {
  auto n = parse_number<std::size_t>(v);
  if (!n || *n < 1 || *n > store::case_query::max_page_size)
    return tl::unexpected(bad_parameter("limit", "a number from 1 to 500"));
  return *n;
}

constexpr std::array<std::string_view, 12> parameters = {
    "status",    "eval", "target", "tag",   "trial",  "score_min",
    "score_max", "q",    "sort",   "limit", "cursor", "format"};

// The one parameter whose value is checked against a fixed list.
tl::expected<std::vector<std::string>, api_error> statuses(std::string_view v) {
  auto names = split_list(v);
  for (auto& n : names)
    if (!schedule::case_state_from_string(n))
      return tl::unexpected(bad_parameter(
          "status", "'" + n + "' is not one of passed, failed, error, na, skipped, cancelled"));
  return names;
}

tl::expected<void, api_error> set(store::case_query& q, const std::string& k,
                                  const std::string& v) {
  auto& f = q.filter;
  if (k == "status") {
    auto s = statuses(v);
    if (!s) return tl::unexpected(s.error());
    f.statuses = std::move(*s);
  } else if (k == "eval") {
    f.evals = split_list(v);
  } else if (k == "target") {
    f.targets = split_list(v);
  } else if (k == "tag") {
    f.tags = split_list(v);
  } else if (k == "trial") {
    f.trial = parse_number<std::int64_t>(v);
    if (!f.trial) return tl::unexpected(bad_parameter(k, "a whole number"));
  } else if (k == "score_min" || k == "score_max") {
    auto d = parse_number<double>(v);
    if (!d) return tl::unexpected(bad_parameter(k, "a number"));
    (k == "score_min" ? f.score_min : f.score_max) = d;
  } else if (k == "q") {
    if (v.size() > 1000) return tl::unexpected(bad_parameter(k, "at most 1000 bytes"));
    f.text = v;
  } else if (k == "sort") {
    std::string_view name = v;
    q.descending = !name.empty() && name.front() == '-';
    if (q.descending) name.remove_prefix(1);
    auto by = store::case_sort_from(name);
    if (!by)
      return tl::unexpected(bad_parameter(
          k, "one of key, latency, cost, tokens, score (\"-\" first: largest first)"));
    q.sort = *by;
  } else if (k == "limit") {
    auto n = page_limit(v);
    if (!n) return tl::unexpected(n.error());
    q.limit = *n;
  } else if (k == "cursor") {
    if (v.size() > 4096) return tl::unexpected(bad_parameter(k, "not a cursor this server gave"));
    q.cursor = v;
  } else if (k == "format") {
    if (v != "json" && v != "ndjson") return tl::unexpected(bad_parameter(k, "json or ndjson"));
  }
  return {};
}

json::value optional_number(const std::optional<double>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

}  // namespace

bool wants_ndjson(const request_target& t, std::string_view accept) {
  if (auto f = t.param("format")) return *f == "ndjson";
  return accept.find("application/x-ndjson") != std::string_view::npos;
}

tl::expected<store::case_query, api_error> decode_case_query(const request_target& t) {
  store::case_query q;
  for (auto& [k, v] : t.query) {
    if (std::find(parameters.begin(), parameters.end(), k) == parameters.end()) {
      if (k == "state")
        return tl::unexpected(bad_parameter(
            k, "filters the NDJSON dump (format=ndjson); a page is filtered by 'status'"));
      return tl::unexpected(
          bad_parameter(k,
                        "not a parameter of this route (status, eval, target, tag, trial, "
                        "score_min, score_max, q, sort, limit, cursor, format)"));
    }
    if (auto ok = set(q, k, v); !ok) return tl::unexpected(ok.error());
  }
  return q;
}

json::object case_page_json(const store::case_page& page) {
  json::array cases;
  cases.reserve(page.cases.size());
  for (auto& s : page.cases) {
    json::object o{{"key", s.key},
                   {"eval", s.eval},
                   {"sample", s.sample},
                   {"target", s.target},
                   {"params", s.params},
                   {"trial", s.trial},
                   {"tags", json::array(s.tags.begin(), s.tags.end())},
                   {"status", s.status},
                   {"attempts", s.attempts},
                   {"latency_ms", optional_number(s.latency_ms)},
                   {"score", optional_number(s.score)},
                   {"cost_usd", optional_number(s.cost_usd)},
                   {"tokens", s.tokens ? json::value(*s.tokens) : json::value(nullptr)},
                   {"tool_calls", s.tool_calls},
                   {"steps", s.steps ? json::value(*s.steps) : json::value(nullptr)},
                   {"input", s.input_preview},
                   {"response", s.response_preview},
                   {"message", s.message}};
    cases.push_back(std::move(o));
  }
  json::array problems, unreadable;
  for (auto& p : page.problems) problems.emplace_back(p);
  for (auto& u : page.unreadable) unreadable.emplace_back(u);
  return json::object{{"cases", std::move(cases)},
                      {"matched", page.matched},
                      {"next_cursor", page.next_cursor.empty() ? json::value(nullptr)
                                                               : json::value(page.next_cursor)},
                      {"problems", std::move(problems)},
                      {"unreadable", std::move(unreadable)}};
}

json::object case_detail_json(const store::case_detail& d) {
  return json::object{{"key", d.record.key},
                      {"record", d.record.record},
                      {"trajectory", d.trajectory ? *d.trajectory : json::value(nullptr)},
                      {"trajectory_source", d.trajectory_source},
                      {"events", d.events},
                      {"events_cut", d.events_cut},
                      {"events_problem", d.events_problem.empty() ? json::value(nullptr)
                                                                  : json::value(d.events_problem)}};
}

namespace {

constexpr std::array<std::pair<std::string_view, compare::change>, 4> change_names = {{
    {"regressed", compare::change::regressed},
    {"fixed", compare::change::fixed},
    {"same", compare::change::same},
    {"unpaired", compare::change::unpaired},
}};

std::string_view name_of(compare::change c) {
  for (auto& [n, v] : change_names)
    if (v == c) return n;
  return "unpaired";
}

json::value state_json(const compare::side& s) {
  return s.state ? json::value(schedule::to_string(*s.state)) : json::value(nullptr);
}

}  // namespace

tl::expected<compare_query, api_error> decode_compare_query(const request_target& t) {
  compare_query q;
  for (auto& [k, v] : t.query) {
    if (k == "base" || k == "candidate") {
      if (auto why = check_run_id(v)) return tl::unexpected(bad_parameter(k, *why));
      (k == "base" ? q.base : q.candidate) = v;
    } else if (k == "change") {
      q.changes.clear();
      for (auto& name : split_list(v)) {
        auto it = std::find_if(change_names.begin(), change_names.end(),
                               [&](auto& p) { return p.first == name; });
        if (it == change_names.end())
          return tl::unexpected(
              bad_parameter(k, "'" + name + "' is not one of regressed, fixed, same, unpaired"));
        q.changes.push_back(it->second);
      }
    } else if (k == "limit") {
      auto n = page_limit(v);
      if (!n) return tl::unexpected(n.error());
      q.limit = *n;
    } else if (k == "cursor") {
      auto n = parse_number<std::size_t>(v);
      if (!n) return tl::unexpected(bad_parameter(k, "not a cursor this server gave"));
      q.offset = *n;
    } else {
      return tl::unexpected(bad_parameter(
          k, "not a parameter of this route (base, candidate, change, limit, cursor)"));
    }
  }
  for (auto* name : {"base", "candidate"})
    if ((std::string_view(name) == "base" ? q.base : q.candidate).empty())
      return tl::unexpected(bad_parameter(name, "a run id is required"));
  return q;
}

json::object compare_page_json(const compare::comparison& c, const compare_query& q) {
  json::array cases;
  std::size_t listed = 0;
  // The cases of each change asked for, in that order; within a change, in key order.
  for (auto want : q.changes)
    for (auto& p : c.cases) {
      if (p.what != want) continue;
      if (listed++ < q.offset || cases.size() >= q.limit + 1) continue;
      cases.push_back(json::object{{"key", p.key},
                                   {"eval", p.eval.str()},
                                   {"sample", p.sample},
                                   {"target", p.target.str()},
                                   {"trial", p.trial},
                                   {"base", state_json(p.base)},
                                   {"candidate", state_json(p.candidate)},
                                   {"change", name_of(p.what)},
                                   {"why", p.why()}});
    }
  json::value next = nullptr;
  if (cases.size() > q.limit) {
    cases.pop_back();
    next = std::to_string(q.offset + q.limit);
  }
  auto& t = c.overall.table;
  return json::object{{"base", c.base_run},
                      {"candidate", c.candidate_run},
                      {"overall", json::object{{"both_pass", t.both_pass},
                                               {"regressed", t.regressed},
                                               {"fixed", t.fixed},
                                               {"both_fail", t.both_fail},
                                               {"delta", t.delta()},
                                               {"p_value", c.overall.p_value}}},
                      {"only_in_base", c.only_in_base},
                      {"only_in_candidate", c.only_in_candidate},
                      {"matched", listed},
                      {"cases", std::move(cases)},
                      {"next_cursor", next}};
}

}  // namespace mira::serve
