// Wire types of the Mira Eval Protocol 1.1 (host <-> study), as plain structs.
// Results keep the study's raw JSON beside the typed view so nothing a newer study sends is
// lost when the host persists it; see codec.hpp for the (lenient) JSON mapping.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace mira::protocol {

namespace json = boost::json;

inline constexpr std::string_view protocol_version = "1.1";

/// Axis values of one case: string -> string, sorted by name (they form part of the case key).
using axis_params = std::map<std::string, std::string>;

/// An open-ended member of a result (a case's input and expected output, a transcript's metadata
/// and output), kept as JSON text and parsed when read. The host persists a result's whole text
/// and reads these members rarely, so building them as Boost.JSON values for every answer was
/// the larger part of what a typical answer cost over a minimal one (docs/performance-log.md,
/// "Typical answers").
///
/// T is json::array, json::object or json::value. A default-constructed one holds the empty T;
/// one made from a value (by hand, or by the DOM decoder) holds that value, unchanged. Text is
/// parsed on each get(): keep the value rather than calling it in a loop. Equality compares
/// the values, not the texts.
template <class T>
class lazy_json {
  static_assert(std::is_same_v<T, json::array> || std::is_same_v<T, json::object> ||
                    std::is_same_v<T, json::value>,
                "lazy_json holds an array, an object or any value");

 public:
  lazy_json() = default;
  /// From a value, copied into the default memory resource. Implicit, so
  /// `result.input = json::array{...}` reads as it did when the member was the value itself.
  lazy_json(const T& v);  // NOLINT(google-explicit-constructor)
  lazy_json(const lazy_json& other);
  lazy_json& operator=(const lazy_json& other);
  lazy_json(lazy_json&& other) noexcept : held_(std::exchange(other.held_, nullptr)) {}
  lazy_json& operator=(lazy_json&& other) noexcept {
    if (this != &other) {
      release(held_);
      held_ = std::exchange(other.held_, nullptr);
    }
    return *this;
  }
  ~lazy_json() { release(held_); }

  /// From text already checked to be one JSON value of T's kind (the decoders check it as they
  /// read). get() throws for anything else: boost::system::system_error for text that is not
  /// JSON, std::invalid_argument for a value of another kind.
  static lazy_json from_checked_text(std::string_view text);

  /// The JSON text. The study's own (whitespace and number spelling kept) when the text decoder
  /// read the answer; for a value held (the DOM decoder's fallback, `execute` results, a value
  /// assigned) the value as to_json_text writes it, which may not read back as the same value:
  /// 1.0 is written "1", an infinity "null". "[]", "{}" or "null" when empty.
  std::string text() const;
  /// text() appended to `out`, without the temporary string: the writers of a study's answers.
  void append_text(std::string& out) const;
  /// The value: parsed with the host's parse options, or a copy of the one held.
  T get() const;

  friend bool operator==(const lazy_json& a, const lazy_json& b) { return a.equals(b); }

 private:
  // The text or the value, in one allocation; null for the empty T. One pointer, because a
  // result is moved several times on its way to the caller and most results hold few of these
  // members: a move is two stores, an absent member costs nothing.
  struct held;
  static void release(held* h) noexcept {
    if (h) destroy(h);
  }
  static void destroy(held* h) noexcept;
  bool equals(const lazy_json& other) const;

  held* held_ = nullptr;
};

extern template class lazy_json<json::array>;
extern template class lazy_json<json::object>;
extern template class lazy_json<json::value>;

/// JSON-RPC-shaped error object carried by an error response.
struct rpc_error {
  std::int64_t code = 0;  // -32602 invalid params, -32601 unknown method, -32603 internal, 0 unset
  std::string message;
  bool retryable = false;
  std::optional<json::value> data;
};

struct initialize_params {
  std::string protocol_version{protocol::protocol_version};
  std::string host = "mira-cpp";
};

struct initialize_result {
  std::string protocol_version;
  std::string study;
  std::int64_t evals = 0;
  std::string study_version;
  std::vector<std::string> capabilities;
  json::object capability_params;
  json::object raw;

  bool has_capability(std::string_view token) const;
};

struct sample_info {
  std::string id;
  std::vector<std::string> tags;
  json::object metadata;
};

/// An eval's samples, held compactly: each costs its id's bytes and 8 more, and its tags and
/// metadata only when it has some. (A sample_info apiece is 72 bytes before its id: `mira list`
/// of a million samples peaked at 89 MB with them, 22 MB with this.) A read gives a sample_info
/// copy, or one part by index.
class sample_list {
 public:
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = sample_info;
    using reference = sample_info;
    using pointer = void;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const sample_list* list, std::size_t i) : list_(list), i_(i) {}
    const sample_info operator*() const { return (*list_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    iterator operator++(int) {
      auto old = *this;
      ++i_;
      return old;
    }
    friend bool operator==(const iterator& a, const iterator& b) { return a.i_ == b.i_; }

   private:
    const sample_list* list_ = nullptr;
    std::size_t i_ = 0;
  };

  sample_list() = default;
  sample_list(std::initializer_list<sample_info> samples);

  std::size_t size() const noexcept { return ends_.size(); }
  bool empty() const noexcept { return ends_.empty(); }
  std::string_view id(std::size_t i) const noexcept;
  /// Empty for a sample listed without tags (metadata).
  const std::vector<std::string>& tags(std::size_t i) const;
  const json::object& metadata(std::size_t i) const;
  /// Sample i whole (a copy); at() throws std::out_of_range past the end. Const, so that
  /// `list[i].id = x` (which would change only the copy) does not compile.
  const sample_info operator[](std::size_t i) const;
  const sample_info at(std::size_t i) const;
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }

  void push_back(sample_info s);
  /// Room for `samples` samples in all, without reallocating.
  void reserve(std::size_t samples);
  /// Leaves the list empty with nothing allocated.
  void clear() noexcept;

  friend bool operator==(const sample_list& a, const sample_list& b);

 private:
  struct extras {
    std::vector<std::string> tags;
    json::object metadata;
  };
  const extras* extras_of(std::size_t i) const;

  std::string ids_;                // every id, one after the other
  std::vector<std::size_t> ends_;  // where sample i's id ends in ids_
  // The samples with tags or metadata, by index, ascending: most have none.
  std::vector<std::pair<std::size_t, extras>> extras_;
};

struct target_info {
  std::string label;
  std::string provider;
  bool available = true;
  json::object metadata;
};

struct axis_info {
  std::string name;
  std::vector<std::string> values;
};

struct eval_info {
  std::string name;
  std::string description;
  sample_list samples;
  std::optional<std::string> next_cursor;
  std::vector<std::string> scorers;
  std::vector<target_info> targets;
  std::vector<axis_info> axes;
  std::optional<std::int64_t> max_turns;
  std::int64_t trials = 1;  // 0 or absent on the wire means 1
  std::optional<std::int64_t> seed;
  json::object metadata;
};

struct list_result {
  std::vector<eval_info> evals;
};

struct list_samples_params {
  std::string eval;
  std::string cursor;
};

struct list_samples_result {
  std::vector<sample_info> samples;
  std::optional<std::string> next_cursor;
};

/// Which case a message is about: one repetition of one matrix case. Written once, shared by
/// run params, run results and execute results (their members are reached as before:
/// `result.eval`, `params.trial`).
struct case_identity {
  std::string eval;
  std::string sample;
  std::string target;
  axis_params params;
  std::int64_t trial = 0;
  std::int64_t trials = 1;  // 0 or absent on the wire means 1
  std::optional<std::int64_t> seed;
};

/// Addresses one repetition of one matrix case; the params of run and execute.
struct run_params : case_identity {
  /// Not a member of the protocol's RunParams: the host's per-case timeout, in milliseconds from
  /// when it sent the request, when it has one; a study that does not know the member ignores
  /// it, as it ignores every unknown one (mira::study gives it to subjects as a deadline). Not
  /// part of the case's identity: results do not echo it.
  std::optional<std::int64_t> timeout_ms;
};

struct score {
  std::string scorer;
  double value = 0.0;
  bool pass = false;
  bool na = false;
  std::string reason;
};

struct usage {
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::int64_t cache_read_tokens = 0;
  std::int64_t reasoning_tokens = 0;
  double cost_usd = 0.0;

  bool is_default() const {
    return input_tokens == 0 && output_tokens == 0 && cache_read_tokens == 0 &&
           reasoning_tokens == 0 && cost_usd == 0.0;
  }
};

struct timing {
  std::optional<std::int64_t> duration_ms;
  std::optional<std::int64_t> time_to_first_token_ms;
};

enum class error_kind { subject, infra };

/// The lightweight transcript summary that `run` results carry.
struct transcript_summary {
  std::string final_response;
  std::int64_t iterations = 0;
  std::int64_t tool_calls_count = 0;
  std::vector<std::string> tool_calls;
  protocol::usage usage;
  protocol::timing timing;
  std::map<std::string, double> metrics;
  lazy_json<json::object> metadata;
  std::optional<std::string> error;
  protocol::error_kind error_kind = error_kind::subject;
  lazy_json<json::array> output;  // multimodal Parts (see decode_part)
};

/// The full transcript of `execute` (and of `score` params).
struct transcript : transcript_summary {
  std::optional<json::value> trajectory;
  json::array events;
  json::object files;
};

struct run_result : case_identity {
  lazy_json<json::array> input;
  std::optional<lazy_json<json::value>> expected;
  bool passed = false;
  double aggregate = 0.0;
  std::vector<protocol::score> scores;
  transcript_summary transcript;
  bool skipped = false;
  /// The result object's JSON text exactly as the study sent it, unknown fields included:
  /// what the host persists. Text, not a DOM, so a result costs one copy on the hot path.
  std::string raw_json;

  /// Every score is N/A (and there is at least one): neither passed nor failed.
  bool is_na() const;
  /// raw_json parsed (empty for a result built by hand).
  json::object raw() const;
};

struct execute_result : case_identity {
  protocol::transcript transcript;
  bool skipped = false;
  /// The result's JSON text as the study sent it; re-serialized with the projected flat
  /// transcript fields when the study sent a trajectory.
  std::string raw_json;

  json::object raw() const;
};

/// Params of `score`: a case identity plus the transcript to score, kept as JSON so a stored
/// artifact is replayed byte-for-byte (trajectory and unknown fields included).
struct score_params {
  run_params identity;
  json::object transcript;
};

struct cancel_params {
  std::int64_t id = 0;
};

struct cancel_result {
  bool cancelled = false;
};

/// `event` notification payload. `kind` is an open vocabulary: unknown kinds are carried through.
struct event_params {
  std::int64_t request_id = 0;  // 0 = uncorrelated
  std::string eval;
  std::string sample;
  std::string target;
  axis_params params;
  std::string kind;
  std::optional<std::int64_t> turn;
  std::optional<std::string> tool;
  std::optional<std::string> text;
  json::object raw;
};

struct log_params {
  std::int64_t request_id = 0;
  std::string message;
  json::object raw;
};

/// One multimodal content piece, tagged by `kind`.
struct part {
  std::string kind;  // text | image | audio | file | json (open)
  std::string text;
  std::string media_type;
  std::string name;
  std::optional<std::string> uri;
  std::optional<std::string> data;
  std::optional<json::value> json;
};

}  // namespace mira::protocol
