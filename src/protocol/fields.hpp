// One description of each wire type's fields: its JSON name, the member it fills and the rules
// a decoder or writer applies to it. Both decoders walk these tables (the DOM one in codec.cpp,
// the text one in text_decoder.cpp) and so does the text writer (text_encoder.cpp), so a field
// added, renamed or given a rule is added once and they cannot drift apart. How a value is read
// or written follows from the member's type; the writer writes the fields in the table's order.
#pragma once

#include <mira/protocol/types.hpp>

#include <array>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace mira::protocol::detail {

enum field_rule : unsigned {
  plain = 0,
  required = 1,        // absent or null is an error ("missing required field")
  non_negative = 2,    // an integer below 0 is an error ("must not be negative")
  zero_means_one = 4,  // 0 (or absent) reads as 1: `trials`
  // The writer leaves it out at its default: empty, false, 0 (<= 1 with zero_means_one),
  // error_kind::subject, an object with no member written. An unset std::optional member is
  // always left out; every other member is always written.
  omitted = 8,
};

template <class Owner, class Member>
struct field {
  std::string_view name;
  Member Owner::*member;
  unsigned rules = plain;
};

template <class Owner, class Member>
constexpr field<Owner, Member> f(std::string_view name, Member Owner::*member,
                                 unsigned rules = plain) {
  return {name, member, rules};
}

/// description<T>::fields: a tuple of field<>, in the order the DOM decoder reads (and so the
/// order in which it reports the first error).
template <class T>
struct description;

template <class T>
concept described = requires {
  description<T>::fields;
};

/// Calls fn(field, index) for each field of T.
template <class T, class F>
constexpr void for_each_field(F&& fn) {
  std::apply(
      [&](const auto&... fs) {
        std::size_t i = 0;
        (fn(fs, i++), ...);
      },
      description<T>::fields);
}

template <class T>
constexpr std::size_t field_count = std::tuple_size_v<decltype(description<T>::fields)>;

/// The JSON names of T's fields, by index.
template <class T>
constexpr auto field_names = std::apply(
    [](const auto&... fs) { return std::array<std::string_view, sizeof...(fs)>{fs.name...}; },
    description<T>::fields);

template <>
struct description<case_identity> {
  static constexpr auto fields = std::tuple{
      f("eval", &case_identity::eval),
      f("sample", &case_identity::sample),
      f("target", &case_identity::target),
      f("params", &case_identity::params, omitted),
      f("trial", &case_identity::trial, non_negative | omitted),
      f("trials", &case_identity::trials, non_negative | zero_means_one | omitted),
      f("seed", &case_identity::seed),
  };
};

template <>
struct description<run_params> {
  static constexpr auto fields =
      std::tuple_cat(description<case_identity>::fields,
                     std::tuple{f("timeout_ms", &run_params::timeout_ms, non_negative)});
};

template <>
struct description<score> {
  static constexpr auto fields = std::tuple{
      f("scorer", &score::scorer),  f("value", &score::value),   f("pass", &score::pass),
      f("na", &score::na, omitted), f("reason", &score::reason),
  };
};

template <>
struct description<usage> {
  static constexpr auto fields = std::tuple{
      f("input_tokens", &usage::input_tokens),
      f("output_tokens", &usage::output_tokens),
      f("cache_read_tokens", &usage::cache_read_tokens, omitted),
      f("reasoning_tokens", &usage::reasoning_tokens, omitted),
      f("cost_usd", &usage::cost_usd),
  };
};

template <>
struct description<timing> {
  static constexpr auto fields = std::tuple{
      f("duration_ms", &timing::duration_ms),
      f("time_to_first_token_ms", &timing::time_to_first_token_ms),
  };
};

template <>
struct description<transcript_summary> {
  using t = transcript_summary;
  static constexpr auto fields = std::tuple{
      f("final_response", &t::final_response),
      f("iterations", &t::iterations),
      f("tool_calls_count", &t::tool_calls_count),
      f("tool_calls", &t::tool_calls, omitted),
      f("usage", &t::usage),
      f("timing", &t::timing, omitted),
      f("metrics", &t::metrics, omitted),
      f("metadata", &t::metadata, omitted),
      f("error", &t::error),
      f("error_kind", &t::error_kind, omitted),
      f("output", &t::output, omitted),
  };
};

template <>
struct description<transcript> {
  static constexpr auto fields =
      std::tuple_cat(description<transcript_summary>::fields,
                     std::tuple{f("trajectory", &transcript::trajectory),
                                f("events", &transcript::events), f("files", &transcript::files)});
};

template <>
struct description<run_result> {
  using r = run_result;
  static constexpr auto fields = std::tuple_cat(
      description<case_identity>::fields,
      std::tuple{f("input", &r::input, omitted), f("expected", &r::expected),
                 f("passed", &r::passed), f("aggregate", &r::aggregate), f("scores", &r::scores),
                 f("transcript", &r::transcript), f("skipped", &r::skipped)});
};

template <>
struct description<execute_result> {
  using r = execute_result;
  static constexpr auto fields =
      std::tuple_cat(description<case_identity>::fields,
                     std::tuple{f("transcript", &r::transcript), f("skipped", &r::skipped)});
};

template <>
struct description<sample_info> {
  static constexpr auto fields = std::tuple{
      f("id", &sample_info::id, required),
      f("tags", &sample_info::tags, omitted),
      f("metadata", &sample_info::metadata, omitted),
  };
};

template <>
struct description<target_info> {
  static constexpr auto fields = std::tuple{
      f("label", &target_info::label, required),
      f("provider", &target_info::provider, omitted),
      f("available", &target_info::available),
      f("metadata", &target_info::metadata, omitted),
  };
};

template <>
struct description<axis_info> {
  static constexpr auto fields = std::tuple{
      f("name", &axis_info::name, required),
      f("values", &axis_info::values),
  };
};

template <>
struct description<eval_info> {
  using e = eval_info;
  static constexpr auto fields = std::tuple{
      f("name", &e::name, required),
      f("description", &e::description, omitted),
      f("samples", &e::samples),
      f("next_cursor", &e::next_cursor),
      f("scorers", &e::scorers),
      f("targets", &e::targets),
      f("axes", &e::axes, omitted),
      f("max_turns", &e::max_turns),
      f("trials", &e::trials, non_negative | zero_means_one | omitted),
      f("seed", &e::seed),
      f("metadata", &e::metadata, omitted),
  };
};

template <>
struct description<list_result> {
  static constexpr auto fields = std::tuple{f("evals", &list_result::evals, required)};
};

template <>
struct description<list_samples_result> {
  static constexpr auto fields = std::tuple{
      f("samples", &list_samples_result::samples),
      f("next_cursor", &list_samples_result::next_cursor),
  };
};

template <>
struct description<initialize_result> {
  using r = initialize_result;
  static constexpr auto fields = std::tuple{
      f("protocol_version", &r::protocol_version, required),
      f("study", &r::study, required),
      f("evals", &r::evals),
      f("study_version", &r::study_version, omitted),
      f("capabilities", &r::capabilities, omitted),
      f("capability_params", &r::capability_params, omitted),
  };
};

template <>
struct description<rpc_error> {
  static constexpr auto fields = std::tuple{
      f("code", &rpc_error::code, omitted),
      f("message", &rpc_error::message, required),
      f("retryable", &rpc_error::retryable, omitted),
      f("data", &rpc_error::data),
  };
};

template <>
struct description<cancel_result> {
  static constexpr auto fields = std::tuple{f("cancelled", &cancel_result::cancelled)};
};

template <>
struct description<event_params> {
  using e = event_params;
  static constexpr auto fields = std::tuple{
      f("request_id", &e::request_id),
      f("eval", &e::eval),
      f("sample", &e::sample),
      f("target", &e::target),
      f("params", &e::params, omitted),
      f("kind", &e::kind),
      f("turn", &e::turn),
      f("tool", &e::tool),
      f("text", &e::text),
  };
};

template <>
struct description<log_params> {
  static constexpr auto fields = std::tuple{
      f("request_id", &log_params::request_id),
      f("message", &log_params::message),
  };
};

template <>
struct description<initialize_params> {
  static constexpr auto fields = std::tuple{
      f("protocol_version", &initialize_params::protocol_version),
      f("host", &initialize_params::host),
  };
};

template <>
struct description<list_samples_params> {
  static constexpr auto fields = std::tuple{
      f("eval", &list_samples_params::eval, required),
      f("cursor", &list_samples_params::cursor, required),
  };
};

template <>
struct description<cancel_params> {
  static constexpr auto fields = std::tuple{f("id", &cancel_params::id, required | non_negative)};
};

}  // namespace mira::protocol::detail
