// Shard and merge records of meta.json, and the plan fingerprint (see shard_meta.hpp).
#include <mira/store/shard_meta.hpp>

#include <mira/store/files.hpp>
#include "store/digest.hpp"

#include <algorithm>

namespace mira::store {

namespace json = boost::json;

namespace {

json::array strings_json(const std::vector<std::string>& v) {
  json::array out;
  for (auto& s : v) out.emplace_back(s);
  return out;
}

std::optional<std::size_t> count_member(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  if (v && v->is_int64() && v->get_int64() >= 0) return static_cast<std::size_t>(v->get_int64());
  if (v && v->is_uint64()) return static_cast<std::size_t>(v->get_uint64());
  return std::nullopt;
}

}  // namespace

json::object selection_json(const plan::selection& sel) {
  json::object axes;
  for (auto& [name, globs] : sel.axes) {
    auto& slot = axes[name];
    if (!slot.is_array()) slot = json::array{};
    slot.as_array().push_back(strings_json(globs));
  }
  return {{"filter", sel.filter},
          {"evals", strings_json(sel.evals)},
          {"samples", strings_json(sel.samples)},
          {"targets", strings_json(sel.targets)},
          {"tags", strings_json(sel.tags)},
          {"axes", std::move(axes)},
          {"trials", sel.trials ? json::value(*sel.trials) : json::value(nullptr)},
          {"seed", sel.seed ? json::value(*sel.seed) : json::value(nullptr)}};
}

std::string plan_fingerprint(const plan::plan& whole, const plan::selection& sel) {
  std::vector<std::string> keys;
  keys.reserve(whole.cases.size());
  for (std::size_t i = 0; i < whole.cases.size(); ++i) keys.push_back(whole.cases.key(i));
  std::sort(keys.begin(), keys.end());
  std::string text;
  for (auto& k : keys) (text += k) += '\n';
  text += canonical_json(selection_json(sel));
  return sha256_hex(text);
}

json::object shard_info::to_json() const {
  return {{"index", spec.index},
          {"count", spec.count},
          {"fingerprint", fingerprint},
          {"plan_cases", plan_cases},
          {"shard_cases", shard_cases}};
}

tl::expected<std::optional<shard_info>, error> shard_of(const run_meta& meta) {
  auto* v = meta.extra.if_contains("shard");
  if (!v) return std::nullopt;
  auto bad = [&](const char* why) {
    return tl::make_unexpected(error{make_error_code(errc::corrupt),
                                     "meta.json of run " + meta.run_id + ": \"shard\" " + why});
  };
  if (!v->is_object()) return bad("is not an object");
  auto& o = v->get_object();
  auto index = count_member(o, "index"), count = count_member(o, "count");
  auto* fp = o.if_contains("fingerprint");
  if (!index || !count || !fp || !fp->is_string())
    return bad("needs a whole \"index\" and \"count\" and a \"fingerprint\"");
  if (*count == 0 || *index >= *count) return bad("has an index not below its count");
  shard_info s;
  s.spec = {*index, *count};
  s.fingerprint = fp->get_string();
  s.plan_cases = count_member(o, "plan_cases").value_or(0);
  s.shard_cases = count_member(o, "shard_cases").value_or(0);
  return s;
}

void set_shard(run_meta& meta, const shard_info& s) {
  meta.extra["shard"] = s.to_json();
}

json::object merged_info::to_json() const {
  json::array list;
  for (auto& s : shards)
    list.push_back(json::object{{"index", s.index},
                                {"run_id", s.run_id},
                                {"started", s.started},
                                {"finished", s.finished},
                                {"hostnames", strings_json(s.hostnames)},
                                {"seconds", s.seconds},
                                {"cases", s.cases}});
  json::array miss;
  for (auto m : missing) miss.emplace_back(m);
  return {{"count", count},
          {"fingerprint", fingerprint},
          {"plan_cases", plan_cases},
          {"shards", std::move(list)},
          {"missing", std::move(miss)},
          {"not_run", not_run}};
}

}  // namespace mira::store
