// Compares what the text decoder and the DOM decoder make of one text, field by field: they
// must agree (run results, listings and run params). Doubles may differ in the last place:
// Boost.JSON 1.81 does not round every decimal correctly (the text decoder uses std::from_chars,
// which does).
#pragma once

#include <mira/protocol/codec.hpp>
#include "protocol/json_scan.hpp"
#include "protocol/text_decoder.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>
#include <string>

namespace mira::test {

inline bool close_doubles(double a, double b) {
  if (a == b) return true;
  return std::nextafter(a, b) == b || std::nextafter(std::nextafter(a, b), b) == b;
}

/// Empty when equal, else the first field that differs.
inline std::string run_result_diff(const protocol::run_result& a, const protocol::run_result& b) {
  auto& ta = a.transcript;
  auto& tb = b.transcript;
  auto scores_equal = [&] {
    if (a.scores.size() != b.scores.size()) return false;
    for (std::size_t i = 0; i < a.scores.size(); ++i) {
      auto& x = a.scores[i];
      auto& y = b.scores[i];
      if (x.scorer != y.scorer || !close_doubles(x.value, y.value) || x.pass != y.pass ||
          x.na != y.na || x.reason != y.reason)
        return false;
    }
    return true;
  };
  auto metrics_equal = [&] {
    if (ta.metrics.size() != tb.metrics.size()) return false;
    for (auto ia = ta.metrics.begin(), ib = tb.metrics.begin(); ia != ta.metrics.end(); ++ia, ++ib)
      if (ia->first != ib->first || !close_doubles(ia->second, ib->second)) return false;
    return true;
  };
  struct check {
    const char* name;
    bool equal;
  };
  const check checks[] = {
      {"eval", a.eval == b.eval},
      {"sample", a.sample == b.sample},
      {"target", a.target == b.target},
      {"params", a.params == b.params},
      {"trial", a.trial == b.trial},
      {"trials", a.trials == b.trials},
      {"seed", a.seed == b.seed},
      {"input", a.input == b.input},
      {"expected", a.expected == b.expected},
      {"passed", a.passed == b.passed},
      {"aggregate", close_doubles(a.aggregate, b.aggregate)},
      {"scores", scores_equal()},
      {"skipped", a.skipped == b.skipped},
      {"raw_json", a.raw_json == b.raw_json},
      {"transcript.final_response", ta.final_response == tb.final_response},
      {"transcript.iterations", ta.iterations == tb.iterations},
      {"transcript.tool_calls_count", ta.tool_calls_count == tb.tool_calls_count},
      {"transcript.tool_calls", ta.tool_calls == tb.tool_calls},
      {"transcript.usage", ta.usage.input_tokens == tb.usage.input_tokens &&
                               ta.usage.output_tokens == tb.usage.output_tokens &&
                               ta.usage.cache_read_tokens == tb.usage.cache_read_tokens &&
                               ta.usage.reasoning_tokens == tb.usage.reasoning_tokens &&
                               close_doubles(ta.usage.cost_usd, tb.usage.cost_usd)},
      {"transcript.timing",
       ta.timing.duration_ms == tb.timing.duration_ms &&
           ta.timing.time_to_first_token_ms == tb.timing.time_to_first_token_ms},
      {"transcript.metrics", metrics_equal()},
      {"transcript.metadata", ta.metadata == tb.metadata},
      {"transcript.error", ta.error == tb.error},
      {"transcript.error_kind", ta.error_kind == tb.error_kind},
      {"transcript.output", ta.output == tb.output},
  };
  for (auto& c : checks)
    if (!c.equal) return c.name;
  return {};
}

/// Decodes `text` both ways; empty when they agree (same result, or the same error).
inline std::string text_and_dom_disagree(std::string_view text) {
  // The reader alone is the host's hot path, with no skim before it: it must take no text the
  // skim refuses.
  protocol::run_result alone;
  if (protocol::detail::read_run_result_text(text, alone)) {
    auto end = detail::scan_json_value(text, detail::skip_json_ws(text, 0));
    if (end == detail::json_scan_failed || detail::skip_json_ws(text, end) != text.size())
      return "the text reader took text the skim refuses";
  }
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec, {}, detail::host_parse_options());
  auto by_text = protocol::decode_run_result_text(text);
  if (ec) return by_text ? "the text decoder accepted text that is not JSON" : "";
  auto by_dom = protocol::decode_run_result(v, std::string(text));
  if (by_text.has_value() != by_dom.has_value())
    return by_text ? "only the text decoder accepted it: DOM says " + by_dom.error().message()
                   : "only the DOM decoder accepted it: text says " + by_text.error().message();
  if (!by_text) {
    if (by_text.error().message() != by_dom.error().message())
      return "errors differ: " + by_text.error().message() + " / " + by_dom.error().message();
    return {};
  }
  return run_result_diff(*by_text, *by_dom);
}

namespace detail_diff {
// A listing's every field, as JSON: encode() writes them all.
inline boost::json::object as_json(const protocol::list_result& l) {
  return protocol::encode(l);
}
inline boost::json::object as_json(const protocol::list_samples_result& l) {
  protocol::eval_info holder;
  for (const auto& s : l.samples) holder.samples.push_back(s);
  holder.next_cursor = l.next_cursor;
  return protocol::encode(holder);
}
// Every field of run params, timeout_ms included: the writer a host sends them with.
inline boost::json::object as_json(const protocol::run_params& p) {
  std::string text;
  protocol::append_json(text, p);
  return boost::json::parse(text).as_object();
}
template <class T, class ByText, class ByDom>
std::string disagree(std::string_view text, ByText by_text_decode, ByDom by_dom_decode) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec, {}, detail::host_parse_options());
  auto by_text = by_text_decode(text);
  if (ec) return by_text ? "the text decoder accepted text that is not JSON" : "";
  auto by_dom = by_dom_decode(v);
  if (by_text.has_value() != by_dom.has_value())
    return by_text ? "only the text decoder accepted it: DOM says " + by_dom.error().message()
                   : "only the DOM decoder accepted it: text says " + by_text.error().message();
  if (!by_text) {
    if (by_text.error().message() != by_dom.error().message())
      return "errors differ: " + by_text.error().message() + " / " + by_dom.error().message();
    return {};
  }
  if (as_json(*by_text) != as_json(*by_dom))
    return "values differ: " + boost::json::serialize(as_json(*by_text)) + " / " +
           boost::json::serialize(as_json(*by_dom));
  return {};
}
}  // namespace detail_diff

/// The same for the listings (`list` and `list_samples` results).
inline std::string listing_text_and_dom_disagree(std::string_view text) {
  auto list = detail_diff::disagree<protocol::list_result>(text, protocol::decode_list_result_text,
                                                           protocol::decode_list_result);
  if (!list.empty()) return "list: " + list;
  auto samples = detail_diff::disagree<protocol::list_samples_result>(
      text, protocol::decode_list_samples_result_text, protocol::decode_list_samples_result);
  if (!samples.empty()) return "list_samples: " + samples;
  return {};
}

/// The same for run and execute params: a study reads them by the text reader on its hot path.
inline std::string run_params_text_and_dom_disagree(std::string_view text) {
  auto diff = detail_diff::disagree<protocol::run_params>(text, protocol::decode_run_params_text,
                                                          protocol::decode_run_params);
  return diff.empty() ? diff : "run params: " + diff;
}

}  // namespace mira::test
