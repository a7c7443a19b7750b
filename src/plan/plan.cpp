// The planner (see plan.hpp).
#include <mira/plan/plan.hpp>

#include <algorithm>
#include <functional>
#include <ostream>
#include <string_view>
#include <unordered_set>

namespace mira::plan {

namespace {

// `eval/sample@target[k=v,...]` appended to `k`: one spelling for logical_key and make_plan.
void append_logical_key(std::string& k, std::string_view eval, std::string_view sample,
                        std::string_view target, const protocol::axis_params& params) {
  k += eval;
  k += '/';
  k += sample;
  k += '@';
  k += target;
  if (params.empty()) return;
  k += '[';
  bool first = true;
  for (auto& [name, value] : params) {  // std::map: sorted by name
    if (!first) k += ',';
    first = false;
    k += name;
    k += '=';
    k += value;
  }
  k += ']';
}

}  // namespace

shared_name::shared_name(std::string_view text)
    : r_(text.empty() ? nullptr : new rep{1, std::string(text)}) {}

const std::string& shared_name::empty_text() noexcept {
  static const std::string empty;
  return empty;
}

std::ostream& operator<<(std::ostream& os, const shared_name& n) {
  return os << n.str();
}

shared_axes::shared_axes(protocol::axis_params params)
    : r_(params.empty() ? nullptr : new rep{1, std::move(params)}) {}

const protocol::axis_params& shared_axes::none() noexcept {
  static const protocol::axis_params empty;
  return empty;
}

case_params::case_params(const protocol::case_identity& p)
    : eval(p.eval),
      sample(p.sample),
      target(p.target),
      params(protocol::axis_params(p.params)),
      trial(p.trial),
      trials(p.trials),
      seed(p.seed) {}

case_params::operator protocol::run_params() const {
  protocol::run_params p;
  p.eval = eval.str();
  p.sample = sample.str();
  p.target = target.str();
  p.params = params.get();
  p.trial = trial;
  p.trials = trials;
  p.seed = seed;
  return p;
}

std::string logical_key(const protocol::run_params& p) {
  std::string k;
  append_logical_key(k, p.eval, p.sample, p.target, p.params);
  return k;
}

std::string logical_key(const case_params& p) {
  std::string k;
  append_logical_key(k, p.eval, p.sample, p.target, p.params);
  return k;
}

std::string_view planned_case::logical_key() const {
  std::string_view k = key;
  if (params.trials <= 1) return k;
  auto suffix = '#' + std::to_string(params.trial);
  if (k.size() > suffix.size() && k.substr(k.size() - suffix.size()) == suffix)
    k.remove_suffix(suffix.size());
  return k;
}

std::string case_key(const protocol::run_params& p) {
  auto k = logical_key(p);
  if (p.trials > 1) k += '#' + std::to_string(p.trial);
  return k;
}

std::string case_key(const case_params& p) {
  auto k = logical_key(p);
  if (p.trials > 1) k += '#' + std::to_string(p.trial);
  return k;
}

namespace {

// Matches one [...] class at pattern[pi] against c; returns the index past the class, or
// npos when the class is unterminated (then '[' is an ordinary character).
std::size_t match_class(std::string_view pat, std::size_t pi, char c, bool& matched) {
  std::size_t i = pi + 1;
  bool negate = i < pat.size() && (pat[i] == '!' || pat[i] == '^');
  if (negate) ++i;
  bool any = false;
  bool first = true;
  for (; i < pat.size() && (pat[i] != ']' || first); ++i) {
    first = false;
    if (i + 2 < pat.size() && pat[i + 1] == '-' && pat[i + 2] != ']') {
      if (c >= pat[i] && c <= pat[i + 2]) any = true;
      i += 2;
    } else if (pat[i] == c) {
      any = true;
    }
  }
  if (i >= pat.size()) return std::string_view::npos;
  matched = any != negate;
  return i + 1;
}

}  // namespace

namespace {

// The end of the `[...]` class opening at `open` (the index past its `]`), or npos.
std::size_t class_end(std::string_view pat, std::size_t open) {
  std::size_t i = open + 1;
  if (i < pat.size() && (pat[i] == '!' || pat[i] == '^')) ++i;
  if (i < pat.size() && pat[i] == ']') ++i;  // a leading ] is a member
  auto close = pat.find(']', i);
  return close == std::string_view::npos ? close : close + 1;
}

// Every pattern `{a,b}` alternatives stand for, nested ones included: "x{a,b{c,d}}" gives xa,
// xbc, xbd. A brace without its partner, and braces inside [...], are literal.
void expand_braces(std::string_view pat, std::vector<std::string>& out) {
  for (std::size_t i = 0; i < pat.size(); ++i) {
    if (pat[i] == '[') {
      auto end = class_end(pat, i);
      if (end != std::string_view::npos) i = end - 1;
      continue;
    }
    if (pat[i] != '{') continue;
    // The matching '}' and the top-level commas between.
    std::vector<std::size_t> cuts{i};
    int depth = 0;
    std::size_t j = i + 1;
    for (; j < pat.size(); ++j) {
      if (pat[j] == '[') {
        auto end = class_end(pat, j);
        if (end != std::string_view::npos) j = end - 1;
      } else if (pat[j] == '{') {
        ++depth;
      } else if (pat[j] == '}') {
        if (depth-- == 0) break;
      } else if (pat[j] == ',' && depth == 0) {
        cuts.push_back(j);
      }
    }
    if (j >= pat.size()) continue;  // unbalanced: literal
    cuts.push_back(j);
    auto head = pat.substr(0, i), tail = pat.substr(j + 1);
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      auto alt = pat.substr(cuts[k] + 1, cuts[k + 1] - cuts[k] - 1);
      expand_braces(std::string(head) + std::string(alt) + std::string(tail), out);
    }
    return;
  }
  out.emplace_back(pat);
}

bool match_one(std::string_view pat, std::string_view text);

}  // namespace

bool glob_match(std::string_view pat, std::string_view text) {
  if (pat.find('{') == std::string_view::npos) return match_one(pat, text);
  std::vector<std::string> alternatives;
  expand_braces(pat, alternatives);
  return std::any_of(alternatives.begin(), alternatives.end(),
                     [&](const std::string& p) { return match_one(p, text); });
}

namespace {

bool match_one(std::string_view pat, std::string_view text) {
  std::size_t p = 0, t = 0;
  std::size_t star = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star = p++;
      star_t = t;
      continue;
    }
    if (p < pat.size()) {
      if (pat[p] == '?') {
        ++p;
        ++t;
        continue;
      }
      if (pat[p] == '[') {
        bool m = false;
        auto next = match_class(pat, p, text[t], m);
        if (next != std::string_view::npos) {
          if (m) {
            p = next;
            ++t;
            continue;
          }
        } else if (text[t] == '[') {
          ++p;
          ++t;
          continue;
        }
      } else if (pat[p] == text[t]) {
        ++p;
        ++t;
        continue;
      }
    }
    if (star == std::string_view::npos) return false;
    p = star + 1;  // let the last * swallow one more character
    t = ++star_t;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

bool any_glob(const std::vector<std::string>& globs, std::string_view text) {
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& g) { return glob_match(g, text); });
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 20; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 20) out += ", ...";
  return out;
}

tl::unexpected<error> fail(errc e, std::string m) {
  return tl::unexpected(error{make_error_code(e), std::move(m)});
}

// Cross-product of the eval's axis values that satisfy every --axis constraint on them.
std::vector<protocol::axis_params> combinations(const protocol::eval_info& eval,
                                                const selection& sel) {
  std::vector<protocol::axis_params> out(1);
  for (auto& axis : eval.axes) {
    if (axis.values.empty()) continue;
    std::vector<std::string> allowed;
    for (auto& v : axis.values) {
      bool ok = true;
      for (auto& [name, globs] : sel.axes)
        if (name == axis.name && !any_glob(globs, v)) ok = false;
      if (ok) allowed.push_back(v);
    }
    std::vector<protocol::axis_params> next;
    next.reserve(out.size() * allowed.size());
    for (auto& base : out)
      for (auto& v : allowed) {
        auto c = base;
        c[axis.name] = v;
        next.push_back(std::move(c));
      }
    out = std::move(next);
  }
  return out;
}

std::string describe(const case_params& p) {
  std::string d =
      "eval \"" + p.eval + "\", sample \"" + p.sample + "\", target \"" + p.target + "\"";
  for (auto& [k, v] : p.params) d.append(", ").append(k).append("=\"").append(v).append("\"");
  return d;
}

}  // namespace

tl::expected<plan, error> make_plan(const protocol::list_result& list, const selection& sel) {
  std::vector<std::string> eval_names;
  for (auto& e : list.evals) eval_names.push_back(e.name);
  for (auto& g : sel.evals)
    if (std::none_of(eval_names.begin(), eval_names.end(),
                     [&](const std::string& n) { return glob_match(g, n); }))
      return fail(errc::no_match,
                  "--evals: \"" + g + "\" matches no eval (evals: " + joined(eval_names) + ")");

  std::vector<const protocol::eval_info*> evals;
  for (auto& e : list.evals)
    if (sel.evals.empty() || any_glob(sel.evals, e.name)) evals.push_back(&e);

  // Every other glob must match something in the selected evals.
  auto some = [&](auto&& pred) {
    return std::any_of(evals.begin(), evals.end(), [&](auto* e) { return pred(*e); });
  };
  for (auto& g : sel.targets)
    if (!some([&](auto& e) {
          return std::any_of(e.targets.begin(), e.targets.end(),
                             [&](auto& t) { return glob_match(g, t.label); });
        }))
      return fail(errc::no_match,
                  "--targets: \"" + g + "\" matches no target of the selected evals");
  for (auto& g : sel.samples)
    if (!some([&](auto& e) {
          return std::any_of(e.samples.begin(), e.samples.end(),
                             [&](auto& s) { return glob_match(g, s.id); });
        }))
      return fail(errc::no_match,
                  "--samples: \"" + g + "\" matches no sample of the selected evals");
  for (auto& tag : sel.tags)
    if (!some([&](auto& e) {
          return std::any_of(e.samples.begin(), e.samples.end(), [&](auto& s) {
            return std::find(s.tags.begin(), s.tags.end(), tag) != s.tags.end();
          });
        }))
      return fail(errc::no_match,
                  "--tag: no sample of the selected evals has the tag \"" + tag + "\"");
  for (auto& [name, globs] : sel.axes) {
    std::vector<std::string> values;
    bool declared = false;
    for (auto* e : evals)
      for (auto& a : e->axes)
        if (a.name == name) {
          declared = true;
          values.insert(values.end(), a.values.begin(), a.values.end());
        }
    if (!declared) {
      std::vector<std::string> names;
      for (auto* e : evals)
        for (auto& a : e->axes)
          if (std::find(names.begin(), names.end(), a.name) == names.end()) names.push_back(a.name);
      return fail(errc::no_match, "--axis: unknown axis \"" + name + "\" (declared: " +
                                      (names.empty() ? std::string("none") : joined(names)) + ")");
    }
    for (auto& g : globs)
      if (std::none_of(values.begin(), values.end(), [&](auto& v) { return glob_match(g, v); }))
        return fail(errc::no_match,
                    std::string("--axis ").append(name).append(": \"").append(g).append(
                        "\" matches no value (values: " + joined(values) + ")"));
  }

  // What each selected eval contributes, first, so the plan is allocated once: a plan of a
  // million cases grown by doubling would move every case several times and keep up to twice
  // its size.
  struct eval_grid {
    const protocol::eval_info* eval;
    std::vector<const protocol::sample_info*> samples;
    std::vector<const protocol::target_info*> targets;
    std::vector<shared_axes> combos;
    std::int64_t trials;
    std::optional<std::int64_t> seed;
  };
  std::vector<eval_grid> grids;
  std::size_t most = 0;  // cases before the filter
  for (auto* e : evals) {
    eval_grid g{e, {}, {}, {}, 1, sel.seed ? sel.seed : e->seed};
    for (auto& combo : combinations(*e, sel)) g.combos.emplace_back(std::move(combo));
    for (auto& s : e->samples) {
      if (!sel.samples.empty() && !any_glob(sel.samples, s.id)) continue;
      if (!sel.tags.empty() && std::none_of(sel.tags.begin(), sel.tags.end(), [&](auto& t) {
            return std::find(s.tags.begin(), s.tags.end(), t) != s.tags.end();
          }))
        continue;
      g.samples.push_back(&s);
    }
    for (auto& t : e->targets)
      if (sel.targets.empty() || any_glob(sel.targets, t.label)) g.targets.push_back(&t);
    g.trials = std::max<std::int64_t>(1, sel.trials ? *sel.trials : e->trials);
    most +=
        g.samples.size() * g.targets.size() * g.combos.size() * static_cast<std::size_t>(g.trials);
    grids.push_back(std::move(g));
  }

  plan out;
  // A filter may keep few of `most`: then the plan grows as it goes.
  if (sel.filter.empty()) out.cases.reserve(most);
  // Duplicate keys, found through the cases' own keys (indices into out.cases), not copies.
  auto key_hash = [&out](std::size_t i) { return std::hash<std::string_view>{}(out.cases[i].key); };
  auto key_equal = [&out](std::size_t a, std::size_t b) {
    return out.cases[a].key == out.cases[b].key;
  };
  std::unordered_set<std::size_t, decltype(key_hash), decltype(key_equal)> keys(
      sel.filter.empty() ? most : 0, key_hash, key_equal);
  for (auto& g : grids) {
    auto* e = g.eval;
    // One name per eval, sample, target and provider, shared by every case that carries it.
    const shared_name eval_name(e->name);
    std::vector<shared_name> sample_names, target_names, providers;
    sample_names.reserve(g.samples.size());
    for (auto* s : g.samples) sample_names.emplace_back(s->id);
    target_names.reserve(g.targets.size());
    providers.reserve(g.targets.size());
    for (auto* t : g.targets) {
      target_names.emplace_back(t->label);
      providers.emplace_back(t->provider);
    }
    eval_counts counts;
    counts.eval = e->name;
    counts.samples = g.samples.size();
    counts.targets = g.targets.size();
    counts.axis_combinations = g.combos.size();
    counts.trials = static_cast<std::size_t>(g.trials);
    for (std::size_t si = 0; si < g.samples.size(); ++si)
      for (std::size_t ti = 0; ti < g.targets.size(); ++ti)
        for (auto& combo : g.combos) {
          auto* s = g.samples[si];
          auto* t = g.targets[ti];
          // The logical key is made once per (sample, target, combination), not per trial.
          std::string logical;
          append_logical_key(logical, e->name, s->id, t->label, combo);
          if (!sel.filter.empty() && logical.find(sel.filter) == std::string::npos) continue;
          for (std::int64_t trial = 0; trial < g.trials; ++trial) {
            // Built in place: no per-trial copy of a whole case.
            auto& tc = out.cases.emplace_back();
            tc.params.eval = eval_name;
            tc.params.sample = sample_names[si];
            tc.params.target = target_names[ti];
            tc.params.params = combo;
            tc.params.trial = trial;
            tc.params.trials = g.trials;
            if (g.seed) tc.params.seed = *g.seed + trial;
            tc.provider = providers[ti];
            tc.available = t->available;
            if (g.trials > 1)
              tc.key = logical + '#' + std::to_string(trial);
            else  // the only trial: its key is the logical key
              tc.key.swap(logical);
            auto [it, fresh] = keys.insert(out.cases.size() - 1);
            if (!fresh) {
              auto message = "two cases have the key \"" + tc.key +
                             "\": " + describe(out.cases[*it].params) + " and " +
                             describe(tc.params) + " (names contain / @ [ ] , = or #)";
              return fail(errc::duplicate_key, std::move(message));
            }
            ++counts.cases;
          }
        }
    if (counts.cases > 0 || sel.filter.empty()) out.evals.push_back(std::move(counts));
  }
  return out;
}

}  // namespace mira::plan
