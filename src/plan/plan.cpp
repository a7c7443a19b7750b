// The planner (see plan.hpp).
#include <mira/plan/plan.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <ostream>
#include <stdexcept>
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

case_list::case_list() : rows_(std::make_shared<rows>()) {
  rows_->axes.emplace_back();  // row 0: no axis params
}

void case_list::clear() {
  *this = case_list();
}

case_list::rows& case_list::own_rows() {
  if (rows_.use_count() > 1) rows_ = std::make_shared<rows>(*rows_);
  return *rows_;
}

std::string_view case_list::sample(std::size_t i) const {
  const auto n = entries_[i].sample;
  const auto& r = *rows_;
  const std::uint32_t begin = n == 0 ? 0 : r.samples[n - 1].name_end;
  return std::string_view(r.names).substr(begin, r.samples[n].name_end - begin);
}

const protocol::axis_params& case_list::axes(std::size_t i) const {
  return rows_->axes[entries_[i].axes];
}

case_params case_list::params(std::size_t i) const {
  case_params p;
  const auto& g = group_of(i);
  p.eval = g.eval;
  p.sample = shared_name(sample(i));
  p.target = target_of(i).label;
  p.params = rows_->axes[entries_[i].axes];
  p.trial = entries_[i].trial;
  p.trials = g.trials;
  if (g.seed_base) p.seed = *g.seed_base + p.trial;
  return p;
}

std::string case_list::logical_key(std::size_t i) const {
  std::string k;
  append_logical_key(k, eval(i), sample(i), target(i), axes(i));
  return k;
}

std::string case_list::key(std::size_t i) const {
  auto k = logical_key(i);
  if (trials(i) > 1) k += '#' + std::to_string(entries_[i].trial);
  return k;
}

planned_case case_list::operator[](std::size_t i) const {
  planned_case c;
  c.params = params(i);
  c.key = key(i);
  const auto& t = target_of(i);
  c.provider = t.provider;
  c.available = t.available;
  c.tags = tags(i);
  return c;
}

bool case_list::same_logical_case(std::size_t a, std::size_t b) const {
  const auto &x = entries_[a], &y = entries_[b];
  if (x.sample == y.sample && x.target == y.target && x.axes == y.axes) return true;
  return eval(a) == eval(b) && sample(a) == sample(b) && target(a) == target(b) &&
         axes(a) == axes(b);
}

std::uint32_t case_list::add_group(const shared_name& eval, std::int64_t trials,
                                   std::optional<std::int64_t> seed_base) {
  auto& r = own_rows();
  for (std::size_t n = r.groups.size(); n-- > 0;) {
    auto& g = r.groups[n];
    if (g.eval == eval && g.trials == trials && g.seed_base == seed_base)
      return static_cast<std::uint32_t>(n);
  }
  r.groups.push_back({eval, trials, seed_base});
  return static_cast<std::uint32_t>(r.groups.size() - 1);
}

std::uint32_t case_list::add_sample(std::uint32_t group, std::string_view name,
                                    const std::vector<std::string>& tags) {
  auto& r = own_rows();
  r.names += name;
  if (r.names.size() > std::numeric_limits<std::uint32_t>::max())
    throw std::length_error("plan: sample names beyond 4 GiB");
  r.samples.push_back({group, static_cast<std::uint32_t>(r.names.size())});
  const auto row = static_cast<std::uint32_t>(r.samples.size() - 1);
  if (!tags.empty()) {
    // Samples of one eval mostly share a few sets of tags: the last ones are looked at.
    std::size_t set = 0;
    for (std::size_t n = r.tag_sets.size(), seen = 0; n-- > 1 && seen < 16 && !set; ++seen)
      if (r.tag_sets[n] == tags) set = n;
    if (!set) {
      r.tag_sets.push_back(tags);
      set = r.tag_sets.size() - 1;
    }
    r.tagged.emplace_back(row, static_cast<std::uint32_t>(set));
  }
  return row;
}

const std::vector<std::string>& case_list::tags(std::size_t i) const {
  const auto row = entries_[i].sample;
  auto& t = rows_->tagged;
  auto it = std::lower_bound(t.begin(), t.end(), std::pair{row, std::uint32_t{0}});
  return rows_->tag_sets[it != t.end() && it->first == row ? it->second : 0];
}

std::uint32_t case_list::add_target(const shared_name& label, const shared_name& provider,
                                    bool available) {
  auto& r = own_rows();
  for (std::size_t n = r.targets.size(); n-- > 0;) {
    auto& t = r.targets[n];
    if (t.label == label && t.provider == provider && t.available == available)
      return static_cast<std::uint32_t>(n);
  }
  r.targets.push_back({label, provider, available});
  return static_cast<std::uint32_t>(r.targets.size() - 1);
}

std::uint32_t case_list::add_axes(const shared_axes& axes) {
  auto& r = own_rows();
  if (axes.empty()) return 0;
  // The same combination is found by its identity (make_plan shares one per combination), or
  // among the last rows by value.
  for (std::size_t n = r.axes.size(), seen = 0; n-- > 1 && seen < 16; ++seen)
    if (r.axes[n].identity() == axes.identity()) return static_cast<std::uint32_t>(n);
  for (std::size_t n = r.axes.size(), seen = 0; n-- > 1 && seen < 16; ++seen)
    if (r.axes[n] == axes) return static_cast<std::uint32_t>(n);
  r.axes.push_back(axes);
  return static_cast<std::uint32_t>(r.axes.size() - 1);
}

void case_list::append(std::uint32_t sample, std::uint32_t target, std::uint32_t axes,
                       std::int64_t trial) {
  if (trial < 0 || trial > std::numeric_limits<std::uint32_t>::max())
    throw std::out_of_range("plan: trial " + std::to_string(trial) + " out of range");
  entries_.push_back({sample, target, axes, static_cast<std::uint32_t>(trial)});
}

void case_list::push_back(const planned_case& c) {
  const auto& p = c.params;
  std::optional<std::int64_t> seed_base;
  if (p.seed) seed_base = *p.seed - p.trial;
  const auto group = add_group(p.eval, p.trials, seed_base);
  // The last sample's row when it is the same sample: a plan's cases come grouped by sample.
  std::optional<std::uint32_t> sample;
  if (!rows_->samples.empty()) {
    const auto last = static_cast<std::uint32_t>(rows_->samples.size() - 1);
    const std::uint32_t begin = last == 0 ? 0 : rows_->samples[last - 1].name_end;
    const auto name =
        std::string_view(rows_->names).substr(begin, rows_->samples[last].name_end - begin);
    if (rows_->samples[last].group == group && name == std::string_view(p.sample)) sample = last;
  }
  if (!sample) sample = add_sample(group, p.sample, c.tags);
  append(*sample, add_target(p.target, c.provider, c.available), add_axes(p.params), p.trial);
}

case_list case_list::subset(const std::vector<std::size_t>& indices) const {
  case_list out;
  out.rows_ = rows_;
  out.entries_.reserve(indices.size());
  for (auto i : indices) out.entries_.push_back(entries_.at(i));
  return out;
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

tl::unexpected<error> fail(errc e, field f, std::string_view rest) {
  return tl::unexpected(make_error(e, f, rest));
}

// Cross-product of the eval's axis values that satisfy every constraint of the selection's axes on
// them.
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

// The evals the selection's evals select (all when it has none); a glob that matches no eval is an
// error.
tl::expected<std::vector<const protocol::eval_info*>, error> selected_evals(
    const protocol::list_result& list, const selection& sel) {
  std::vector<std::string> eval_names;
  for (auto& e : list.evals) eval_names.push_back(e.name);
  for (auto& g : sel.evals)
    if (std::none_of(eval_names.begin(), eval_names.end(),
                     [&](const std::string& n) { return glob_match(g, n); }))
      return fail(errc::no_match, field::evals,
                  ": \"" + g + "\" matches no eval (evals: " + joined(eval_names) + ")");
  std::vector<const protocol::eval_info*> evals;
  for (auto& e : list.evals)
    if (sel.evals.empty() || any_glob(sel.evals, e.name)) evals.push_back(&e);
  return evals;
}

// Each of the selection's axes (NAME and its globs) names an axis of the selected evals, and each
// glob matches one of its values: a typo is an error rather than an empty plan.
tl::expected<void, error> check_axis_globs(const std::vector<const protocol::eval_info*>& evals,
                                           const selection& sel) {
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
      return fail(errc::no_match, field::axes,
                  ": unknown axis \"" + name + "\" (declared: " +
                      (names.empty() ? std::string("none") : joined(names)) + ")");
    }
    for (auto& g : globs)
      if (std::none_of(values.begin(), values.end(), [&](auto& v) { return glob_match(g, v); })) {
        std::string why = " ";
        why.append(name).append(": \"").append(g).append("\" matches no value (values: ");
        why.append(joined(values)).append(")");
        return fail(errc::no_match, field::axes, why);
      }
  }
  return {};
}

// Every glob other than the evals' must match something in the selected evals.
tl::expected<void, error> check_globs(const std::vector<const protocol::eval_info*>& evals,
                                      const selection& sel) {
  auto some = [&](auto&& pred) {
    return std::any_of(evals.begin(), evals.end(), [&](auto* e) { return pred(*e); });
  };
  for (auto& g : sel.targets)
    if (!some([&](auto& e) {
          return std::any_of(e.targets.begin(), e.targets.end(),
                             [&](auto& t) { return glob_match(g, t.label); });
        }))
      return fail(errc::no_match, field::targets,
                  ": \"" + g + "\" matches no target of the selected evals");
  // By index: a sample_list gives ids and tags in place, a whole sample only as a copy.
  auto any_sample = [](const protocol::eval_info& e, auto&& pred) {
    for (std::size_t i = 0; i < e.samples.size(); ++i)
      if (pred(i)) return true;
    return false;
  };
  for (auto& g : sel.samples)
    if (!some([&](auto& e) {
          return any_sample(e, [&](std::size_t i) { return glob_match(g, e.samples.id(i)); });
        }))
      return fail(errc::no_match, field::samples,
                  ": \"" + g + "\" matches no sample of the selected evals");
  for (auto& tag : sel.tags)
    if (!some([&](auto& e) {
          return any_sample(e, [&](std::size_t i) {
            auto& tags = e.samples.tags(i);
            return std::find(tags.begin(), tags.end(), tag) != tags.end();
          });
        }))
      return fail(errc::no_match, field::tags,
                  ": no sample of the selected evals has the tag \"" + tag + "\"");
  return check_axis_globs(evals, sel);
}

// What one selected eval contributes: its selected samples, targets and axis combinations.
struct eval_grid {
  const protocol::eval_info* eval;
  std::vector<std::uint32_t> samples;  // indexes in eval->samples
  std::vector<const protocol::target_info*> targets;
  std::vector<shared_axes> combos;
  std::int64_t trials;
  std::optional<std::int64_t> seed;

  // Cases before the filter.
  std::size_t size() const {
    return samples.size() * targets.size() * combos.size() * static_cast<std::size_t>(trials);
  }
};

eval_grid grid_of(const protocol::eval_info& e, const selection& sel) {
  eval_grid g{&e, {}, {}, {}, 1, sel.seed ? sel.seed : e.seed};
  for (auto& combo : combinations(e, sel)) g.combos.emplace_back(std::move(combo));
  for (std::size_t i = 0; i < e.samples.size(); ++i) {
    if (!sel.samples.empty() && !any_glob(sel.samples, e.samples.id(i))) continue;
    auto& tags = e.samples.tags(i);
    if (!sel.tags.empty() && std::none_of(sel.tags.begin(), sel.tags.end(), [&](auto& t) {
          return std::find(tags.begin(), tags.end(), t) != tags.end();
        }))
      continue;
    g.samples.push_back(static_cast<std::uint32_t>(i));
  }
  for (auto& t : e.targets)
    if (sel.targets.empty() || any_glob(sel.targets, t.label)) g.targets.push_back(&t);
  g.trials = std::max<std::int64_t>(1, sel.trials ? *sel.trials : e.trials);
  return g;
}

// Whether two cases could share a key: a name repeats (an eval, or a sample, target or axis
// combination of one eval) or holds a character of the key's syntax.
bool names_may_clash(const std::vector<eval_grid>& grids) {
  auto syntax = [](std::string_view n) { return n.find_first_of("/@[],=#") != n.npos; };
  auto repeats = [](auto names) {
    std::sort(names.begin(), names.end());
    return std::adjacent_find(names.begin(), names.end()) != names.end();
  };
  std::vector<std::string_view> evals, names;
  for (auto& g : grids) {
    evals.push_back(g.eval->name);
    names.clear();
    for (auto s : g.samples) names.push_back(g.eval->samples.id(s));
    if (repeats(names)) return true;
    names.clear();
    for (auto* t : g.targets) names.push_back(t->label);
    if (repeats(names)) return true;
    std::vector<protocol::axis_params> combos;
    for (auto& combo : g.combos) combos.push_back(combo);
    if (repeats(std::move(combos))) return true;
    if (syntax(g.eval->name) ||
        std::any_of(g.samples.begin(), g.samples.end(),
                    [&](auto s) { return syntax(g.eval->samples.id(s)); }) ||
        std::any_of(g.targets.begin(), g.targets.end(), [&](auto* t) { return syntax(t->label); }))
      return true;
    for (auto& combo : g.combos)
      for (auto& [name, value] : combo)
        if (syntax(name) || syntax(value)) return true;
  }
  return repeats(std::move(evals));
}

// A set of the plan's case indexes, hashed and compared by their keys, each key made when it is
// looked at: the set holds no key strings.
struct case_key_hash {
  const plan* p;
  std::size_t operator()(std::size_t i) const { return std::hash<std::string>{}(p->cases.key(i)); }
};
struct case_key_equal {
  const plan* p;
  bool operator()(std::size_t a, std::size_t b) const { return p->cases.key(a) == p->cases.key(b); }
};
using key_set = std::unordered_set<std::size_t, case_key_hash, case_key_equal>;

// Appends the cases of one eval's grid that pass the filter, and returns their counts. With
// `keys`, each new case's key is checked against those before it.
tl::expected<eval_counts, error> add_cases(plan& out, const eval_grid& g, const selection& sel,
                                           key_set* keys) {
  auto* e = g.eval;
  const auto group = out.cases.add_group(shared_name(e->name), g.trials, g.seed);
  std::vector<std::uint32_t> targets, combos;
  for (auto* t : g.targets)
    targets.push_back(
        out.cases.add_target(shared_name(t->label), shared_name(t->provider), t->available));
  for (auto& combo : g.combos) combos.push_back(out.cases.add_axes(combo));
  eval_counts counts;
  counts.eval = e->name;
  counts.samples = g.samples.size();
  counts.targets = g.targets.size();
  counts.axis_combinations = g.combos.size();
  counts.trials = static_cast<std::size_t>(g.trials);
  std::string logical;
  for (auto s : g.samples) {
    const auto id = e->samples.id(s);
    std::optional<std::uint32_t> sample;  // a row once a case of it is kept
    for (std::size_t ti = 0; ti < g.targets.size(); ++ti)
      for (std::size_t ci = 0; ci < g.combos.size(); ++ci) {
        if (!sel.filter.empty()) {
          logical.clear();
          append_logical_key(logical, e->name, id, g.targets[ti]->label, g.combos[ci]);
          if (logical.find(sel.filter) == std::string::npos) continue;
        }
        if (!sample) sample = out.cases.add_sample(group, id, e->samples.tags(s));
        for (std::int64_t trial = 0; trial < g.trials; ++trial) {
          out.cases.append(*sample, targets[ti], combos[ci], trial);
          if (keys) {
            auto [it, fresh] = keys->insert(out.cases.size() - 1);
            if (!fresh) {
              auto message = "two cases have the key \"" + out.cases.key(*it) +
                             "\": " + describe(out.cases.params(*it)) + " and " +
                             describe(out.cases.params(out.cases.size() - 1)) +
                             " (names contain / @ [ ] , = or #)";
              return fail(errc::duplicate_key, field::none, message);
            }
          }
          ++counts.cases;
        }
      }
  }
  return counts;
}

}  // namespace

tl::expected<plan, error> make_plan(const protocol::list_result& list, const selection& sel) {
  auto evals = selected_evals(list, sel);
  if (!evals) return tl::unexpected(evals.error());
  if (auto checked = check_globs(*evals, sel); !checked) return tl::unexpected(checked.error());

  // What each selected eval contributes, first, so the plan is allocated once: a plan of a
  // million cases grown by doubling would move every case several times and keep up to twice
  // its size.
  std::vector<eval_grid> grids;
  std::size_t most = 0;  // cases before the filter
  for (auto* e : *evals) {
    grids.push_back(grid_of(*e, sel));
    most += grids.back().size();
  }

  plan out;
  // A filter may keep few of `most`: then the plan grows as it goes.
  if (sel.filter.empty()) out.cases.reserve(most);
  // Two cases can share a key only when names repeat or contain a character of the key's
  // syntax. Otherwise nothing is checked per case: a set of ten million keys would cost more
  // than the plan.
  const bool keys_may_clash = names_may_clash(grids);
  key_set keys(0, case_key_hash{&out}, case_key_equal{&out});
  for (auto& g : grids) {
    auto counts = add_cases(out, g, sel, keys_may_clash ? &keys : nullptr);
    if (!counts) return tl::unexpected(counts.error());
    if (counts->cases > 0 || sel.filter.empty()) out.evals.push_back(std::move(*counts));
  }
  return out;
}

}  // namespace mira::plan
