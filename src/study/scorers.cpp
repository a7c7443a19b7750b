// The built-in scorers (see scorers.hpp). Names, reasons and verdicts follow the Rust SDK's:
// names quote strings as Rust's `{:?}` does and print numbers as its `{}` does, so that `list`
// reads the same from a study in either language.
#include <mira/study/scorers.hpp>

#include <mira/protocol/json_text.hpp>
#include <mira/study/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/json/parse.hpp>
#include <boost/regex.hpp>
#include <boost/system/system_error.hpp>
#include <tl/expected.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace mira::study::scorers {

namespace json = boost::json;
using protocol::transcript;

namespace {

// --- text as Rust writes it --------------------------------------------------------------------

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(parts), ...);
  return out;
}

// A string as Rust's `{:?}` writes it: quoted, with its escapes.
std::string quoted(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\0':
        out += "\\0";
        break;
      default: {
        auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
          out += "\\u{";
          if (u >= 0x10) out += hex[u >> 4];
          out += hex[u & 0xf];
          out += '}';
        } else {
          out += c;
        }
      }
    }
  }
  out += '"';
  return out;
}

// A double as Rust's `{}` writes it: the shortest digits that read back, never an exponent.
std::string number(double d) {
  if (std::isnan(d)) return "NaN";
  char buf[400];  // the longest fixed form: 309 integral digits, or 17 digits after 0.000...
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  return {buf, r.ptr};
}

// A double with `digits` decimals, as Rust's `{:.4}`.
std::string fixed(double d, int digits) {
  char buf[400];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed, digits);
  return {buf, r.ptr};
}

std::string number(std::int64_t n) {
  return std::to_string(n);
}

// --- text comparisons as Rust's str does them ---------------------------------------------------

// Length of the white space character (Unicode White_Space, Rust's char::is_whitespace) that `s`
// starts with, in UTF-8; 0 when it starts with something else.
std::size_t space_at(std::string_view s) {
  if (s.empty()) return 0;
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  if (b(0) == ' ' || (b(0) >= 0x09 && b(0) <= 0x0d)) return 1;
  if (s.size() >= 2 && b(0) == 0xc2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;
  if (s.size() < 3) return 0;
  const bool space = (b(0) == 0xe1 && b(1) == 0x9a && b(2) == 0x80) ||  // U+1680
                     (b(0) == 0xe2 && b(1) == 0x80 &&
                      (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf)) ||
                     (b(0) == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) ||  // U+205F
                     (b(0) == 0xe3 && b(1) == 0x80 && b(2) == 0x80);    // U+3000
  return space ? 3 : 0;
}

std::string_view trim(std::string_view s) {
  while (auto n = space_at(s)) s.remove_prefix(n);
  for (bool more = true; more;) {
    more = false;
    for (std::size_t n = 1; n <= 3 && n <= s.size(); ++n) {
      if (space_at(s.substr(s.size() - n)) == n) {
        s.remove_suffix(n);
        more = true;
        break;
      }
    }
  }
  return s;
}

bool equal_ignoring_ascii_case(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&](char x, char y) { return lower(x) == lower(y); });
}

bool has(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

bool called(const transcript& t, const std::string& tool) {
  return std::ranges::find(t.tool_calls, tool) != t.tool_calls.end();
}

// --- regular expressions -----------------------------------------------------------------------

// A pattern compiled once, in the factory; one that does not compile keeps its error, which
// every score of the scorer then reports (as Rust's regex scorers do), rather than the factory
// throwing while an eval is being declared.
class pattern {
 public:
  explicit pattern(const std::string& source) {
    try {
      re_.emplace(source, boost::regex::perl);
    } catch (const boost::regex_error& e) {
      error_ = e.what();
    }
  }

  /// The compile error, empty when the pattern compiled.
  const std::string& error() const { return error_; }

  /// Whether the pattern matches somewhere in `text`, or why the matcher gave up (Boost throws
  /// std::runtime_error past its complexity and memory limits, where a recursive matcher would
  /// overflow the stack).
  tl::expected<bool, std::string> search(std::string_view text) const {
    try {
      return boost::regex_search(text.begin(), text.end(), *re_);
    } catch (const std::runtime_error& e) {
      return tl::make_unexpected(std::string(e.what()));
    }
  }

 private:
  std::optional<boost::regex> re_;
  std::string error_;
};

// --- JSON ---------------------------------------------------------------------------------------

// The final response as JSON. Nesting is limited to the 127 levels serde_json (what Rust's
// json_valid parses with) accepts.
json::value parse_response(std::string_view text, boost::system::error_code& ec) {
  json::parse_options options;
  options.max_depth = 127;
  return json::parse(trim(text), ec, json::storage_ptr(), options);
}

const json::value* member(const json::value& v, std::string_view key) {
  const auto* o = v.if_object();
  return o ? o->if_contains(key) : nullptr;
}

std::optional<std::string_view> string_member(const json::value& v, std::string_view key) {
  const auto* m = member(v, key);
  if (!m || !m->is_string()) return std::nullopt;
  return std::string_view(m->get_string());
}

const json::array& no_array() {
  static const json::array none;
  return none;
}

const json::array& array_member(const json::value& v, std::string_view key) {
  const auto* m = member(v, key);
  return m && m->is_array() ? m->get_array() : no_array();
}

// --- the ATIF trajectory -----------------------------------------------------------------------

const json::value* trajectory_of(const transcript& t) {
  return t.trajectory && !t.trajectory->is_null() ? &*t.trajectory : nullptr;
}

constexpr std::string_view no_trajectory = "subject reported no trajectory";

// One tool call of the trajectory, with the observation content answering it.
struct invocation {
  std::string_view name;
  const json::value* arguments = nullptr;
  const json::value* content = nullptr;
};

// Every tool call, in step order. A call's observation is the first result of its own step's
// observation whose source_call_id is the call's tool_call_id. Members of the wrong type are
// read as absent: a malformed trajectory grades as one without them.
std::vector<invocation> invocations(const json::value& trajectory) {
  std::vector<invocation> out;
  for (const auto& step : array_member(trajectory, "steps")) {
    const auto* observation = member(step, "observation");
    const auto& results = observation ? array_member(*observation, "results") : no_array();
    for (const auto& call : array_member(step, "tool_calls")) {
      invocation inv;
      inv.name = string_member(call, "function_name").value_or("");
      inv.arguments = member(call, "arguments");
      if (auto id = string_member(call, "tool_call_id")) {
        auto answer = std::find_if(results.begin(), results.end(), [&](const json::value& r) {
          return string_member(r, "source_call_id") == id;
        });
        if (answer != results.end()) {
          inv.content = member(*answer, "content");
          if (inv.content && inv.content->is_null()) inv.content = nullptr;
        }
      }
      out.push_back(inv);
    }
  }
  return out;
}

// Observation content as text: a string, or the text of its parts joined by newlines (parts
// without text, images, are left out).
std::string content_text(const json::value& content) {
  if (content.is_string()) return std::string(content.get_string());
  std::string out;
  bool first = true;
  for (const auto& p : content.is_array() ? content.get_array() : no_array()) {
    auto text = string_member(p, "text");
    if (!text) continue;
    if (!first) out += '\n';
    out += *text;
    first = false;
  }
  return out;
}

const json::value* at_pointer(const json::value* arguments, std::string_view pointer) {
  if (!arguments) return nullptr;
  boost::system::error_code ec;
  return arguments->find_pointer(pointer, ec);
}

// --- combinators -------------------------------------------------------------------------------

// The score of all_of / any_of, built as the scores of the scorers combined arrive.
class combination {
 public:
  combination(std::string name, bool require_all) : name_(std::move(name)), all_(require_all) {}

  void add(const protocol::score& s) {
    if (!reason_.empty()) reason_ += ", ";
    reason_ += s.na ? "–" : s.pass ? "✓" : "✗";
    reason_ += s.scorer;
    if (s.na) return;
    ++applicable_;
    sum_ += s.value;
    max_ = std::max(max_, s.value);
    every_ = every_ && s.pass;
    some_ = some_ || s.pass;
  }

  protocol::score result() {
    if (applicable_ == 0) return not_applicable(std::move(name_), std::move(reason_));
    if (all_)
      return {std::move(name_), sum_ / static_cast<double>(applicable_), every_, false,
              std::move(reason_)};
    return {std::move(name_), max_, some_, false, std::move(reason_)};
  }

 private:
  std::string name_;
  bool all_;
  std::string reason_;
  std::size_t applicable_ = 0;
  double sum_ = 0.0;
  double max_ = 0.0;
  bool every_ = true;
  bool some_ = false;
};

struct combined {
  std::string name;
  std::vector<scorer> of;
  bool require_all;
};

// By value: the frame keeps the scorers alive while it waits on them.
boost::asio::awaitable<protocol::score> combine(std::shared_ptr<const combined> c, const sample& s,
                                                const transcript& t) {
  combination result(c->name, c->require_all);
  for (const auto& child : c->of) result.add(co_await child.co_score(s, t));
  co_return result.result();
}

scorer combinator(std::string name, std::vector<scorer> of, bool require_all) {
  const bool awaits = std::ranges::any_of(of, [](const scorer& x) { return x.is_coroutine(); });
  auto c = std::make_shared<const combined>(combined{name, std::move(of), require_all});
  if (awaits)
    return {std::move(name), scorer::coroutine([c](const sample& s, const transcript& t) {
              return combine(c, s, t);
            })};
  return {std::move(name), scorer::function([c](const sample& s, const transcript& t) {
            combination result(c->name, c->require_all);
            for (const auto& child : c->of) result.add(child.score(s, t));
            return result.result();
          })};
}

protocol::score inverted(protocol::score inner) {
  std::string name = cat("not(", inner.scorer, ")");
  if (inner.na) return not_applicable(std::move(name), cat("inner N/A: ", inner.reason));
  return {std::move(name), 1.0 - inner.value, !inner.pass, false, cat("inverted: ", inner.reason)};
}

boost::asio::awaitable<protocol::score> invert(scorer inner, const sample& s, const transcript& t) {
  co_return inverted(co_await inner.co_score(s, t));
}

// --- the judge ---------------------------------------------------------------------------------

// The sample's input as text: its strings, and the text of its text parts, one a line.
std::string input_text(const json::array& input) {
  std::string out;
  for (const auto& turn : input) {
    std::optional<std::string_view> text;
    if (turn.is_string())
      text = std::string_view(turn.get_string());
    else if (string_member(turn, "kind") == "text")
      text = string_member(turn, "text");
    if (!text) continue;
    if (!out.empty()) out += '\n';
    out += *text;
  }
  return out;
}

std::string judge_prompt(const std::string& rubric, const sample& s, const transcript& t) {
  std::string p = cat("# Rubric\n", rubric, "\n\n# Input\n", input_text(s.input));
  if (s.expected && s.expected->is_string())
    p += cat("\n\n# Expected answer\n", std::string_view(s.expected->get_string()));
  p += cat("\n\n# Final response\n", t.final_response);
  if (!t.tool_calls.empty()) {
    p += "\n\n# Tools called, in order\n";
    for (std::size_t i = 0; i < t.tool_calls.size(); ++i) p += cat(i ? ", " : "", t.tool_calls[i]);
  }
  if (t.error) p += cat("\n\n# Error\n", *t.error);
  return p;
}

// By value, as combine().
boost::asio::awaitable<protocol::score> ask(std::shared_ptr<judge> j, std::string rubric,
                                            double threshold, const sample& s,
                                            const transcript& t) {
  static constexpr std::string_view name = "model_graded";
  const std::string prompt = judge_prompt(rubric, s, t);
  const judge_request request{rubric, prompt, s, t, t.final_response};
  judgement answer;
  std::optional<std::string> unavailable;
  try {
    answer = co_await j->grade(request);
  } catch (const boost::system::system_error& e) {
    if (e.code() == boost::asio::error::operation_aborted) throw;
    unavailable = e.what();
  } catch (const infra_error&) {
    throw;  // the case's, not this score's: the request loop ends the case as an infra error
  } catch (const std::exception& e) {
    unavailable = e.what();
  } catch (...) {
    unavailable = "an exception that is not a std::exception";
  }
  if (unavailable)
    co_return not_applicable(std::string(name), cat("judge unavailable: ", *unavailable));
  if (std::isnan(answer.score))
    co_return not_applicable(std::string(name), "the judge gave no score (NaN)");
  co_return graded(std::string(name), answer.score, threshold, std::move(answer.reason));
}

}  // namespace

// --- the factories -----------------------------------------------------------------------------

scorer succeeded() {
  return make_scorer("succeeded", [](const sample&, const transcript& t) {
    return t.error ? fail("succeeded", cat("error: ", *t.error)) : pass("succeeded", "no error");
  });
}

scorer non_empty() {
  return make_scorer("non_empty", [](const sample&, const transcript& t) {
    return trim(t.final_response).empty() ? fail("non_empty", "empty response")
                                          : pass("non_empty", "non-empty response");
  });
}

scorer contains(std::string needle) {
  auto name = cat("contains(", quoted(needle), ")");
  return make_scorer(
      std::move(name), [needle = std::move(needle)](const sample&, const transcript& t) {
        return has(t.final_response, needle) ? pass("contains", cat("found ", quoted(needle)))
                                             : fail("contains", cat("missing ", quoted(needle)));
      });
}

scorer not_contains(std::string needle) {
  auto name = cat("not_contains(", quoted(needle), ")");
  return make_scorer(std::move(name),
                     [needle = std::move(needle)](const sample&, const transcript& t) {
                       return has(t.final_response, needle)
                                  ? fail("not_contains", cat("unexpectedly found ", quoted(needle)))
                                  : pass("not_contains", cat("absent ", quoted(needle)));
                     });
}

scorer equals(std::string expected) {
  auto name = cat("equals(", quoted(expected), ")");
  return make_scorer(std::move(name), [expected = std::move(expected)](const sample&,
                                                                       const transcript& t) {
    if (equal_ignoring_ascii_case(trim(t.final_response), trim(expected)))
      return pass("equals", "exact match");
    return fail("equals", cat("expected ", quoted(expected), ", got ", quoted(t.final_response)));
  });
}

scorer regex(std::string source) {
  auto name = cat("regex(", quoted(source), ")");
  return make_scorer(std::move(name), [re = std::make_shared<const pattern>(source), source](
                                          const sample&, const transcript& t) {
    if (!re->error().empty()) return fail("regex", cat("bad pattern: ", re->error()));
    auto found = re->search(t.final_response);
    if (!found) return fail("regex", cat("no verdict for ", quoted(source), ": ", found.error()));
    return *found ? pass("regex", cat("matched ", quoted(source)))
                  : fail("regex", cat("no match for ", quoted(source)));
  });
}

scorer matches_expected() {
  return make_scorer("matches_expected", [](const sample& s, const transcript& t) {
    if (!s.expected || !s.expected->is_string())
      return fail("matches_expected", "sample has no string expected answer");
    std::string_view expected = s.expected->get_string();
    if (trim(t.final_response) == trim(expected))
      return pass("matches_expected", "matched expected");
    return fail("matches_expected", cat("expected ", quoted(expected)));
  });
}

scorer json_valid() {
  return make_scorer("json_valid", [](const sample&, const transcript& t) {
    boost::system::error_code ec;
    parse_response(t.final_response, ec);
    return ec ? fail("json_valid", cat("invalid JSON: ", ec.message()))
              : pass("json_valid", "valid JSON");
  });
}

scorer json_field_equals(std::string key, std::string value) {
  auto name = cat("json_field_equals(", key, "=", quoted(value), ")");
  return make_scorer(std::move(name), [key = std::move(key), value = std::move(value)](
                                          const sample&, const transcript& t) {
    boost::system::error_code ec;
    auto parsed = parse_response(t.final_response, ec);
    const auto* field = ec ? nullptr : member(parsed, key);
    if (!field) return fail("json_field_equals", cat("no JSON field ", key));
    if (field->is_string() && field->get_string() == value)
      return pass("json_field_equals", cat(key, " == ", quoted(value)));
    return fail("json_field_equals",
                cat(key, " is ", protocol::to_json_text(*field), ", expected ", quoted(value)));
  });
}

scorer file_exists(std::string path) {
  auto name = cat("file_exists(", path, ")");
  return make_scorer(std::move(name), [path = std::move(path)](const sample&, const transcript& t) {
    return t.files.contains(path) ? pass("file_exists", cat(path, " exists"))
                                  : fail("file_exists", cat("no such file: ", path));
  });
}

scorer file_contains(std::string path, std::string needle) {
  auto name = cat("file_contains(", path, ", ", quoted(needle), ")");
  return make_scorer(std::move(name), [path = std::move(path), needle = std::move(needle)](
                                          const sample&, const transcript& t) {
    const auto* file = t.files.if_contains(path);
    if (!file) return fail("file_contains", cat("no such file: ", path));
    // Files are text; anything else the study put there cannot contain a needle.
    if (file->is_string() && has(file->get_string(), needle))
      return pass("file_contains", cat(path, " contains ", quoted(needle)));
    return fail("file_contains", cat(path, " missing ", quoted(needle)));
  });
}

scorer tool_called(std::string tool) {
  auto name = cat("tool_called(", tool, ")");
  return make_scorer(std::move(name), [tool = std::move(tool)](const sample&, const transcript& t) {
    return called(t, tool) ? pass("tool_called", cat(tool, " was called"))
                           : fail("tool_called", cat(tool, " never called"));
  });
}

scorer tool_not_called(std::string tool) {
  auto name = cat("tool_not_called(", tool, ")");
  return make_scorer(std::move(name), [tool = std::move(tool)](const sample&, const transcript& t) {
    return called(t, tool) ? fail("tool_not_called", cat(tool, " was called"))
                           : pass("tool_not_called", cat(tool, " never called"));
  });
}

scorer tools_used_exactly(std::vector<std::string> tools) {
  std::ranges::sort(tools);
  tools.erase(std::unique(tools.begin(), tools.end()), tools.end());
  std::string label;
  for (const auto& tool : tools) label += cat(label.empty() ? "" : ",", tool);
  auto name = cat("tools_used_exactly([", label, "])");
  return make_scorer(
      std::move(name), [tools = std::move(tools), label](const sample&, const transcript& t) {
        std::vector<std::string> used = t.tool_calls;
        std::ranges::sort(used);
        used.erase(std::unique(used.begin(), used.end()), used.end());
        if (used == tools) return pass("tools_used_exactly", cat("used exactly [", label, "]"));
        std::string list;
        for (const auto& tool : used) list += cat(list.empty() ? "" : ",", tool);
        return fail("tools_used_exactly", cat("expected [", label, "], used [", list, "]"));
      });
}

scorer tool_called_before(std::string first, std::string second) {
  auto name = cat("tool_called_before(", first, ", ", second, ")");
  return make_scorer(std::move(name), [first = std::move(first), second = std::move(second)](
                                          const sample&, const transcript& t) {
    auto f = std::ranges::find(t.tool_calls, first);
    auto s = std::ranges::find(t.tool_calls, second);
    if (f == t.tool_calls.end() || s == t.tool_calls.end())
      return fail("tool_called_before", cat("both ", first, " and ", second, " must be called"));
    if (f < s) return pass("tool_called_before", cat(first, " before ", second));
    return fail("tool_called_before", cat(first, " not before ", second));
  });
}

scorer tool_calls_within(std::int64_t max) {
  return make_scorer(
      cat("tool_calls_within(", number(max), ")"), [max](const sample&, const transcript& t) {
        auto n = t.tool_calls_count;
        return n <= max ? pass("tool_calls_within", cat(number(n), " <= ", number(max)))
                        : fail("tool_calls_within", cat(number(n), " > ", number(max)));
      });
}

scorer turns_within(std::int64_t max) {
  return make_scorer(cat("turns_within(", number(max), ")"),
                     [max](const sample&, const transcript& t) {
                       auto n = t.iterations;
                       return n <= max ? pass("turns_within", cat(number(n), " <= ", number(max)))
                                       : fail("turns_within", cat(number(n), " > ", number(max)));
                     });
}

scorer tool_called_with(std::string tool, std::string pointer, json::value expected) {
  const auto shown = protocol::to_json_text(expected);
  auto name = cat("tool_called_with(", tool, ", ", pointer, ", ", shown, ")");
  return make_scorer(
      std::move(name), [tool = std::move(tool), pointer = std::move(pointer),
                        expected = std::move(expected), shown](const sample&, const transcript& t) {
        const auto* trajectory = trajectory_of(t);
        if (!trajectory) return fail("tool_called_with", std::string(no_trajectory));
        for (const auto& call : invocations(*trajectory)) {
          if (call.name != tool) continue;
          const auto* value = at_pointer(call.arguments, pointer);
          if (value && *value == expected)
            return pass("tool_called_with", cat(tool, " called with ", pointer, " == ", shown));
        }
        return fail("tool_called_with", cat("no ", tool, " call with ", pointer, " == ", shown));
      });
}

scorer tool_arg_matches(std::string tool, std::string pointer, std::string source) {
  auto name = cat("tool_arg_matches(", tool, ", ", pointer, ", ", quoted(source), ")");
  return make_scorer(std::move(name), [tool = std::move(tool), pointer = std::move(pointer),
                                       re = std::make_shared<const pattern>(source),
                                       source](const sample&, const transcript& t) {
    if (!re->error().empty()) return fail("tool_arg_matches", cat("bad pattern: ", re->error()));
    const auto* trajectory = trajectory_of(t);
    if (!trajectory) return fail("tool_arg_matches", std::string(no_trajectory));
    bool non_string = false;
    for (const auto& call : invocations(*trajectory)) {
      if (call.name != tool) continue;
      const auto* value = at_pointer(call.arguments, pointer);
      if (!value) continue;
      if (!value->is_string()) {
        non_string = true;
        continue;
      }
      auto found = re->search(value->get_string());
      if (!found)
        return fail("tool_arg_matches",
                    cat("no verdict for ", quoted(source), ": ", found.error()));
      if (*found)
        return pass("tool_arg_matches",
                    cat(tool, " called with ", pointer, " matching ", quoted(source)));
    }
    if (non_string)
      return fail("tool_arg_matches",
                  cat("non-string value at ", pointer, " in ", tool, " arguments"));
    return fail("tool_arg_matches",
                cat("no ", tool, " call with ", pointer, " matching ", quoted(source)));
  });
}

scorer observation_contains(std::string tool, std::string needle) {
  auto name = cat("observation_contains(", tool, ", ", quoted(needle), ")");
  return make_scorer(std::move(name), [tool = std::move(tool), needle = std::move(needle)](
                                          const sample&, const transcript& t) {
    const auto* trajectory = trajectory_of(t);
    if (!trajectory) return fail("observation_contains", std::string(no_trajectory));
    for (const auto& call : invocations(*trajectory)) {
      if (call.name == tool && call.content && has(content_text(*call.content), needle))
        return pass("observation_contains", cat(tool, " observation contains ", quoted(needle)));
    }
    return fail("observation_contains", cat("no ", tool, " observation contains ", quoted(needle)));
  });
}

scorer steps_within(std::int64_t max) {
  return make_scorer(
      cat("steps_within(", number(max), ")"), [max](const sample&, const transcript& t) {
        const auto* trajectory = trajectory_of(t);
        if (!trajectory) return fail("steps_within", std::string(no_trajectory));
        auto n = static_cast<std::int64_t>(array_member(*trajectory, "steps").size());
        return n <= max ? pass("steps_within", cat(number(n), " <= ", number(max)))
                        : fail("steps_within", cat(number(n), " > ", number(max)));
      });
}

scorer tokens_within(std::int64_t max) {
  return make_scorer(
      cat("tokens_within(", number(max), ")"), [max](const sample&, const transcript& t) {
        auto n = t.usage.input_tokens + t.usage.output_tokens;
        if (n <= max) return pass("tokens_within", cat(number(n), " <= ", number(max), " tokens"));
        return fail("tokens_within", cat(number(n), " > ", number(max), " tokens"));
      });
}

scorer output_tokens_within(std::int64_t max) {
  return make_scorer(
      cat("output_tokens_within(", number(max), ")"), [max](const sample&, const transcript& t) {
        auto n = t.usage.output_tokens;
        return n <= max ? pass("output_tokens_within", cat(number(n), " <= ", number(max)))
                        : fail("output_tokens_within", cat(number(n), " > ", number(max)));
      });
}

scorer cost_within(double max_usd) {
  return make_scorer(cat("cost_within($", number(max_usd), ")"),
                     [max_usd](const sample&, const transcript& t) {
                       auto cost = t.usage.cost_usd;
                       auto shown = cat("$", fixed(cost, 4));
                       if (cost <= max_usd)
                         return pass("cost_within", cat(shown, " <= $", number(max_usd)));
                       return fail("cost_within", cat(shown, " > $", number(max_usd)));
                     });
}

scorer latency_within(std::int64_t max_ms) {
  return make_scorer(cat("latency_within(", number(max_ms), "ms)"),
                     [max_ms](const sample&, const transcript& t) {
                       // Rust's duration is 0 when the subject did not measure it.
                       auto ms = t.timing.duration_ms.value_or(0);
                       auto shown = cat(number(ms), "ms");
                       if (ms <= max_ms)
                         return pass("latency_within", cat(shown, " <= ", number(max_ms), "ms"));
                       return fail("latency_within", cat(shown, " > ", number(max_ms), "ms"));
                     });
}

scorer ttft_within(std::int64_t max_ms) {
  return make_scorer(cat("ttft_within(", number(max_ms), "ms)"),
                     [max_ms](const sample&, const transcript& t) {
                       const auto& ttft = t.timing.time_to_first_token_ms;
                       if (!ttft) return fail("ttft_within", "subject did not report TTFT");
                       auto shown = cat("ttft ", number(*ttft), "ms");
                       if (*ttft <= max_ms)
                         return pass("ttft_within", cat(shown, " <= ", number(max_ms), "ms"));
                       return fail("ttft_within", cat(shown, " > ", number(max_ms), "ms"));
                     });
}

scorer metric_at_least(std::string metric, double min) {
  auto name = cat("metric_at_least(", metric, " >= ", number(min), ")");
  return make_scorer(std::move(name),
                     [metric = std::move(metric), min](const sample&, const transcript& t) {
                       auto it = t.metrics.find(metric);
                       if (it == t.metrics.end())
                         return fail("metric_at_least", cat("subject did not report ", metric));
                       auto shown = cat(metric, "=", number(it->second));
                       if (it->second >= min)
                         return pass("metric_at_least", cat(shown, " >= ", number(min)));
                       return fail("metric_at_least", cat(shown, " < ", number(min)));
                     });
}

scorer metric_within(std::string metric, double max) {
  auto name = cat("metric_within(", metric, " <= ", number(max), ")");
  return make_scorer(std::move(name),
                     [metric = std::move(metric), max](const sample&, const transcript& t) {
                       auto it = t.metrics.find(metric);
                       if (it == t.metrics.end())
                         return fail("metric_within", cat("subject did not report ", metric));
                       auto shown = cat(metric, "=", number(it->second));
                       if (it->second <= max)
                         return pass("metric_within", cat(shown, " <= ", number(max)));
                       return fail("metric_within", cat(shown, " > ", number(max)));
                     });
}

scorer produced_modality(std::string kind) {
  auto name = cat("produced_modality(", kind, ")");
  return make_scorer(std::move(name), [kind = std::move(kind)](const sample&, const transcript& t) {
    const auto output = t.output.get();
    bool found = std::ranges::any_of(
        output, [&](const json::value& part) { return string_member(part, "kind") == kind; });
    return found ? pass("produced_modality", cat("produced a ", kind, " part"))
                 : fail("produced_modality", cat("no ", kind, " part in output"));
  });
}

scorer all_of(std::string name, std::vector<scorer> of) {
  return combinator(std::move(name), std::move(of), true);
}

scorer any_of(std::string name, std::vector<scorer> of) {
  return combinator(std::move(name), std::move(of), false);
}

scorer not_(scorer inner) {
  auto name = cat("not(", inner.name(), ")");
  if (inner.is_coroutine())
    return {std::move(name), scorer::coroutine([inner](const sample& s, const transcript& t) {
              return invert(inner, s, t);
            })};
  return {std::move(name), scorer::function([inner](const sample& s, const transcript& t) {
            return inverted(inner.score(s, t));
          })};
}

scorer model_graded(std::shared_ptr<judge> j, std::string rubric, double threshold) {
  if (!j) throw std::invalid_argument("mira::study::scorers::model_graded: no judge");
  auto name = cat("model_graded(", quoted(rubric), ")");
  return {std::move(name), scorer::coroutine([j = std::move(j), rubric = std::move(rubric),
                                              threshold](const sample& s, const transcript& t) {
            return ask(j, rubric, threshold, s, t);
          })};
}

}  // namespace mira::study::scorers
