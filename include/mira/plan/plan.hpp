// The planner: the grid of cases (samples x targets x axis combinations x trials) that a
// listing defines after selection, and the case keys that name them. Pure functions over the
// listing; every selection is validated against it.
#pragma once

#include <mira/plan/error.hpp>
#include <mira/protocol/types.hpp>

#include <tl/expected.hpp>

#include <atomic>
#include <compare>
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mira::plan {

/// An eval, sample, target or provider name of a planned case. make_plan() makes one per
/// distinct name and every case carrying it shares it (reference-counted, immutable): 8 bytes
/// a case instead of a 32-byte std::string and, for names over 15 bytes, a heap copy each.
/// Reads as a `const std::string&` (and a std::string_view): compare it with strings, stream
/// it, pass it where a string is read. Assigning a string makes a name of its own.
class shared_name {
 public:
  shared_name() noexcept = default;
  explicit shared_name(std::string_view text);
  shared_name(const shared_name& o) noexcept : r_(o.r_) {
    if (r_) r_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  shared_name(shared_name&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  shared_name& operator=(const shared_name& o) noexcept {
    shared_name(o).swap(*this);
    return *this;
  }
  shared_name& operator=(shared_name&& o) noexcept {
    shared_name(std::move(o)).swap(*this);
    return *this;
  }
  shared_name& operator=(std::string_view text) { return *this = shared_name(text); }
  ~shared_name() {
    if (r_ && r_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete r_;
  }
  void swap(shared_name& o) noexcept { std::swap(r_, o.r_); }

  const std::string& str() const noexcept { return r_ ? r_->text : empty_text(); }
  operator const std::string&() const noexcept {
    return str();
  }  // NOLINT(google-explicit-constructor)
  operator std::string_view() const noexcept {
    return str();
  }  // NOLINT(google-explicit-constructor)
  const char* c_str() const noexcept { return str().c_str(); }
  const char* data() const noexcept { return str().data(); }
  std::size_t size() const noexcept { return str().size(); }
  bool empty() const noexcept { return str().empty(); }
  auto begin() const noexcept { return str().begin(); }
  auto end() const noexcept { return str().end(); }

  friend bool operator==(const shared_name& a, const shared_name& b) noexcept {
    return a.r_ == b.r_ || a.str() == b.str();
  }
  friend bool operator==(const shared_name& a, std::string_view b) noexcept { return a.str() == b; }
  friend std::strong_ordering operator<=>(const shared_name& a, const shared_name& b) noexcept {
    return a.str() <=> b.str();
  }
  friend std::strong_ordering operator<=>(const shared_name& a, std::string_view b) noexcept {
    return std::string_view(a.str()) <=> b;
  }
  friend std::string operator+(const shared_name& a, std::string_view b) {
    return std::string(a.str()).append(b);
  }
  friend std::string operator+(std::string_view a, const shared_name& b) {
    return std::string(a).append(b.str());
  }
  friend std::string operator+(const shared_name& a, char b) { return a.str() + b; }
  friend std::string operator+(char a, const shared_name& b) { return a + b.str(); }
  friend std::ostream& operator<<(std::ostream& os, const shared_name& n);

 private:
  struct rep {
    std::atomic<std::size_t> refs{1};
    std::string text;
  };
  static const std::string& empty_text() noexcept;
  rep* r_ = nullptr;  // nullptr: ""
};

/// A planned case's axis params, shared like its names: make_plan() makes one per axis
/// combination and a case without axes holds none — 8 bytes a case instead of a 48-byte
/// std::map and its nodes. Reads as a `const protocol::axis_params&` (find, iteration, empty,
/// comparison); assigning an axis_params makes one of its own.
class shared_axes {
 public:
  shared_axes() noexcept = default;
  explicit shared_axes(protocol::axis_params params);
  shared_axes(const shared_axes& o) noexcept : r_(o.r_) {
    if (r_) r_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  shared_axes(shared_axes&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  shared_axes& operator=(const shared_axes& o) noexcept {
    shared_axes(o).swap(*this);
    return *this;
  }
  shared_axes& operator=(shared_axes&& o) noexcept {
    shared_axes(std::move(o)).swap(*this);
    return *this;
  }
  shared_axes& operator=(protocol::axis_params params) {
    return *this = shared_axes(std::move(params));
  }
  ~shared_axes() {
    if (r_ && r_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete r_;
  }
  void swap(shared_axes& o) noexcept { std::swap(r_, o.r_); }
  /// The same for copies of one shared_axes (and nullptr for none): to find them again.
  const void* identity() const noexcept { return r_; }

  const protocol::axis_params& get() const noexcept { return r_ ? r_->params : none(); }
  operator const protocol::axis_params&() const noexcept {
    return get();
  }  // NOLINT(google-explicit-constructor)
  auto begin() const noexcept { return get().begin(); }
  auto end() const noexcept { return get().end(); }
  bool empty() const noexcept { return get().empty(); }
  std::size_t size() const noexcept { return get().size(); }
  auto find(const std::string& name) const { return get().find(name); }
  std::size_t count(const std::string& name) const { return get().count(name); }
  const std::string& at(const std::string& name) const { return get().at(name); }

  friend bool operator==(const shared_axes& a, const shared_axes& b) {
    return a.r_ == b.r_ || a.get() == b.get();
  }
  friend bool operator==(const shared_axes& a, const protocol::axis_params& b) {
    return a.get() == b;
  }

 private:
  struct rep {
    std::atomic<std::size_t> refs{1};
    protocol::axis_params params;
  };
  static const protocol::axis_params& none() noexcept;
  rep* r_ = nullptr;  // nullptr: no axis params
};

/// A planned case's identity: protocol::run_params's members, its names shared with the plan's
/// other cases (see shared_name, shared_axes). It converts to a run_params (what is sent to the
/// study), and a run_params or case_identity converts to it.
struct case_params {
  shared_name eval;
  shared_name sample;
  shared_name target;
  shared_axes params;
  std::int64_t trial = 0;
  std::int64_t trials = 1;  // 0 or absent on the wire means 1
  std::optional<std::int64_t> seed;

  case_params() = default;
  case_params(const protocol::case_identity& p);  // NOLINT(google-explicit-constructor)
  operator protocol::run_params() const;          // NOLINT(google-explicit-constructor)
  protocol::run_params run_params() const { return *this; }
  friend bool operator==(const case_params&, const case_params&) = default;
};

struct planned_case {
  case_params params;
  std::string key;                // eval/sample@target[k=v,...]#trial (#trial only when trials > 1)
  shared_name provider;           // the target's provider ("" buckets provider-less targets)
  bool available = true;          // false: the study cannot run it; reported as skipped, never sent
  std::vector<std::string> tags;  // its sample's, from the study's listing

  /// The key without `#trial`: groups the trials of one case. A view of `key`, not a second
  /// string per case.
  std::string_view logical_key() const;
};

/// The cases of a plan, in order. Kept compact, because a plan of ten million cases is kept for
/// a whole run: 16 bytes a case, beside one row per distinct sample (its name), target and axis
/// combination. A case is made whole when it is read: `cases[i]` and iteration give a
/// planned_case by value (its names shared, its key built), so hold it as `const auto&` or
/// `auto`. The accessors below read one part of a case without making the rest.
class case_list {
 public:
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = planned_case;
    using reference = planned_case;
    using pointer = void;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const case_list* list, std::size_t i) : list_(list), i_(i) {}
    planned_case operator*() const { return (*list_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      auto old = *this;
      ++i_;
      return old;
    }
    difference_type operator-(const iterator& o) const {
      return static_cast<difference_type>(i_) - static_cast<difference_type>(o.i_);
    }
    friend bool operator==(const iterator& a, const iterator& b) { return a.i_ == b.i_; }

   private:
    const case_list* list_ = nullptr;
    std::size_t i_ = 0;
  };

  case_list();
  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }
  planned_case operator[](std::size_t i) const;
  planned_case back() const { return (*this)[size() - 1]; }
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }
  void reserve(std::size_t n) { entries_.reserve(n); }
  void clear();
  /// Appends a case; its names join the rows of equal ones (the last sample's, by text).
  void push_back(const planned_case& c);
  /// The cases at `indices` (in that order), sharing this list's rows: no name is copied.
  case_list subset(const std::vector<std::size_t>& indices) const;

  // One part of case i, without making the whole case.
  case_params params(std::size_t i) const;
  std::string key(std::size_t i) const;
  /// The key without `#trial`.
  std::string logical_key(std::size_t i) const;
  const shared_name& eval(std::size_t i) const { return group_of(i).eval; }
  std::string_view sample(std::size_t i) const;
  /// The tags the study's listing gave case i's sample.
  const std::vector<std::string>& tags(std::size_t i) const;
  const shared_name& target(std::size_t i) const { return target_of(i).label; }
  const shared_name& provider(std::size_t i) const { return target_of(i).provider; }
  const protocol::axis_params& axes(std::size_t i) const;
  bool available(std::size_t i) const { return target_of(i).available; }
  std::int64_t trial(std::size_t i) const { return entries_[i].trial; }
  std::int64_t trials(std::size_t i) const { return group_of(i).trials; }
  /// Row numbers, for tables indexed by them: every case of one eval row (target row) has the
  /// same; rows of equal names may differ (eval_name_of and target_name_of tell their names).
  std::uint32_t eval_row(std::size_t i) const { return rows_->samples[entries_[i].sample].group; }
  std::uint32_t target_row(std::size_t i) const { return entries_[i].target; }
  std::size_t eval_rows() const { return rows_->groups.size(); }
  std::size_t target_rows() const { return rows_->targets.size(); }
  const shared_name& eval_name_of(std::uint32_t row) const { return rows_->groups[row].eval; }
  const shared_name& target_name_of(std::uint32_t row) const { return rows_->targets[row].label; }
  /// Plan rows of the same (eval, sample, target, axis combination): equal for the trials of
  /// one logical case, however the list was made.
  bool same_logical_case(std::size_t a, std::size_t b) const;

  // Building a list row by row (make_plan): each returns the row's number for append().
  std::uint32_t add_group(const shared_name& eval, std::int64_t trials,
                          std::optional<std::int64_t> seed_base);
  std::uint32_t add_sample(std::uint32_t group, std::string_view name,
                           const std::vector<std::string>& tags = {});
  std::uint32_t add_target(const shared_name& label, const shared_name& provider, bool available);
  std::uint32_t add_axes(const shared_axes& axes);
  void append(std::uint32_t sample, std::uint32_t target, std::uint32_t axes, std::int64_t trial);

 private:
  struct group_fields {  // an eval's cases with one trial count and base seed
    shared_name eval;
    std::int64_t trials = 1;
    std::optional<std::int64_t> seed_base;  // a case's seed is seed_base + its trial
  };
  struct target_fields {
    shared_name label, provider;
    bool available = true;
  };
  struct sample_row {
    std::uint32_t group = 0;
    std::uint32_t name_end = 0;  // its name ends here in `names` (and starts where the last ended)
  };
  struct rows {  // shared by the lists subset() makes; copied before one of them adds a row
    std::vector<group_fields> groups;
    std::vector<sample_row> samples;
    std::string names;
    std::vector<target_fields> targets;
    std::vector<shared_axes> axes;  // axes[0]: none
    // Only the samples that have tags, by row, ascending: most have none, and a row of every
    // sample would cost each of ten million samples its bytes. tag_sets[0]: none.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> tagged;  // (sample row, tag set)
    std::vector<std::vector<std::string>> tag_sets = {{}};
  };
  struct entry {  // 16 bytes: one per case
    std::uint32_t sample = 0, target = 0, axes = 0, trial = 0;
  };
  rows& own_rows();
  const group_fields& group_of(std::size_t i) const {
    return rows_->groups[rows_->samples[entries_[i].sample].group];
  }
  const target_fields& target_of(std::size_t i) const { return rows_->targets[entries_[i].target]; }
  std::shared_ptr<rows> rows_;
  std::vector<entry> entries_;
};

/// What to run. Globs understand `*`, `?`, `[...]` (with `!` or `^` to negate, `a-z`) and
/// `{a,b}` alternatives (nestable).
struct selection {
  std::string filter;              // substring of the logical key
  std::vector<std::string> evals;  // any of these globs
  std::vector<std::string> samples;
  std::vector<std::string> targets;
  std::vector<std::string> tags;  // samples carrying any of these tags
  /// One entry per --axis flag: NAME and its value globs. Entries for the same NAME
  /// intersect (a value must match a glob of each).
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  std::optional<std::int64_t> trials;  // overrides each eval's trials (0 means 1)
  std::optional<std::int64_t> seed;    // overrides each eval's base seed
};

struct eval_counts {
  std::string eval;
  std::size_t samples = 0;
  std::size_t targets = 0;
  std::size_t axis_combinations = 0;
  std::size_t trials = 0;
  std::size_t cases = 0;  // after the filter
};

struct plan {
  case_list cases;                 // listing order: eval, sample, target, axis combination, trial
  std::vector<eval_counts> evals;  // the evals that contribute, in listing order
};

/// `eval/sample@target` plus a sorted `[k=v,...]` suffix when the case has axis params.
std::string logical_key(const protocol::run_params& p);
std::string logical_key(const case_params& p);
/// The logical key plus `#trial` when the case is one of several trials.
std::string case_key(const protocol::run_params& p);
std::string case_key(const case_params& p);

/// Glob match of the whole of `text`.
bool glob_match(std::string_view pattern, std::string_view text);

/// Plans the selection. Fails naming the offending field (error::field) and value:
/// errc::no_match when a glob matches nothing it could match (an eval, sample, target, tag, axis
/// or axis value), errc::duplicate_key (field::none) when two cases would have the same key
/// (names containing / @ [ ] , = #).
tl::expected<plan, error> make_plan(const protocol::list_result& list, const selection& sel = {});

}  // namespace mira::plan

namespace std {
/// Hashes a shared name as its text, so it keys unordered containers like a std::string.
template <>
struct hash<mira::plan::shared_name> {
  std::size_t operator()(const mira::plan::shared_name& n) const noexcept {
    return std::hash<std::string_view>{}(n);
  }
};
}  // namespace std
