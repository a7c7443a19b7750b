// decode_run_result_text: a RunResult read in one pass from its JSON text into the typed view.
//
// The DOM decoder (codec.cpp) parses every node into a tree, looks fields up, copies them out
// and destroys the tree: most of the host's time per case. Here the fields the typed view holds
// are read straight from the text; only the open-ended members (input, expected, metadata,
// output) become JSON values, and unknown members are skipped. Whatever this reader does not
// expect (a wrong type, a duplicate field, an integer written as 3.0, a negative trial, ...)
// sends the text to the DOM decoder, which either accepts it with the same result or names
// the offending field. The fuzz target checks that both agree.
#include <mira/detail/json_scan.hpp>
#include <mira/protocol/codec.hpp>

#include <boost/json/parse.hpp>

#include <charconv>
#include <cmath>
#include <cstring>

namespace mira::protocol {

namespace {

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

unsigned hex4(const char* p) {
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p[i];
    v = v * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

// Reads valid JSON text. Every method returns false when the text is not what the typed view
// expects at that point; the caller then gives up and leaves the text to the DOM decoder.
class text_reader {
 public:
  explicit text_reader(std::string_view s) : text_(s), p_(s.data()), end_(s.data() + s.size()) {}

  bool at_end() {
    ws();
    return p_ == end_;
  }

  // `{ "key": value, ... }`: on_member(key) reads (or skips) each value.
  template <class F>
  bool object(F&& on_member) {
    if (!eat('{')) return false;
    if (eat('}')) return true;
    do {
      ws();
      std::string_view k;
      if (!key(k) || !eat(':')) return false;
      ws();
      if (!on_member(k)) return false;
    } while (eat(','));
    return eat('}');
  }

  // `[ value, ... ]`: on_element() reads each value.
  template <class F>
  bool array(F&& on_element) {
    if (!eat('[')) return false;
    if (eat(']')) return true;
    do {
      ws();
      if (!on_element()) return false;
    } while (eat(','));
    return eat(']');
  }

  bool null() {
    if (end_ - p_ >= 4 && std::memcmp(p_, "null", 4) == 0) {
      p_ += 4;
      return true;
    }
    return false;
  }
  bool is(char c) const { return p_ < end_ && *p_ == c; }

  bool string(std::string& out) {
    if (!is('"')) return false;
    ++p_;
    out.clear();
    for (;;) {
      const char* run = p_;
      p_ = string_run(run);
      out.append(run, static_cast<std::size_t>(p_ - run));
      if (*p_ == '"') {
        ++p_;
        return true;
      }
      unescape(out);
    }
  }

  bool integer(std::int64_t& out) {
    const char* start = p_;
    if (is('-')) ++p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    if (p_ == start || is('.') || is('e') || is('E')) return false;
    // "-0" may be a double to the DOM parser: leave it to that one.
    if (p_ - start == 2 && start[0] == '-' && start[1] == '0') return false;
    auto [end, ec] = std::from_chars(start, p_, out);
    return ec == std::errc{} && end == p_;
  }

  // A number as a double, correctly rounded (std::from_chars).
  bool number(double& out) {
    const char* start = p_;
    if (is('-')) ++p_;
    while (p_ < end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '.' || *p_ == 'e' || *p_ == 'E' ||
                         *p_ == '+' || *p_ == '-'))
      ++p_;
    std::string_view token(start, static_cast<std::size_t>(p_ - start));
    if (token.empty() || (token.size() == 2 && token == "-0")) return false;
    if (token.find_first_of(".eE") == std::string_view::npos) {
      std::int64_t i;
      auto [end, ec] = std::from_chars(start, p_, i);
      if (ec != std::errc{} || end != p_) return false;  // beyond int64: the DOM decides
      out = static_cast<double>(i);
      return true;
    }
    auto [end, ec] = std::from_chars(start, p_, out);
    return ec == std::errc{} && end == p_ && std::isfinite(out);
  }

  bool boolean(bool& out) {
    if (end_ - p_ >= 4 && std::memcmp(p_, "true", 4) == 0) {
      p_ += 4;
      out = true;
      return true;
    }
    if (end_ - p_ >= 5 && std::memcmp(p_, "false", 5) == 0) {
      p_ += 5;
      out = false;
      return true;
    }
    return false;
  }

  // The next value's text, skipped.
  bool raw(std::string_view& out) {
    auto pos = static_cast<std::size_t>(p_ - text_.data());
    auto end = mira::detail::scan_json_value(text_, pos);
    if (end == mira::detail::json_scan_failed) return false;
    out = text_.substr(pos, end - pos);
    p_ = text_.data() + end;
    return true;
  }
  bool skip() {
    std::string_view ignored;
    return raw(ignored);
  }

 private:
  void ws() {
    const char* p = p_;  // a local: see string_run
    while (p < end_ && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) ++p;
    p_ = p;
  }
  // To the closing quote or the next backslash (valid JSON: one of them follows). On a local
  // pointer: stepping the member would store it on every byte, as a char read may alias it.
  static const char* string_run(const char* p) {
    while (*p != '"' && *p != '\\') ++p;
    return p;
  }
  bool eat(char c) {
    ws();
    if (!is(c)) return false;
    ++p_;
    return true;
  }

  // Keys without escapes are views into the text; the rare escaped key is decoded.
  bool key(std::string_view& out) {
    if (!is('"')) return false;
    const char* start = p_ + 1;
    const char* q = string_run(start);
    if (*q == '"') {
      out = std::string_view(start, static_cast<std::size_t>(q - start));
      p_ = q + 1;
      return true;
    }
    if (!string(key_scratch_)) return false;
    out = key_scratch_;
    return true;
  }

  // At a backslash of valid JSON: appends what it stands for.
  void unescape(std::string& out) {
    char c = p_[1];
    p_ += 2;
    switch (c) {
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:  // '"', '\\', '/'
        out += c;
        return;
    }
    unsigned cp = hex4(p_);
    p_ += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // paired: checked by the scanner
      unsigned low = hex4(p_ + 2);
      p_ += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
  }

  std::string_view text_;
  const char* p_;
  const char* end_;
  std::string key_scratch_;
};

// Each known field may appear once; a repeat goes to the DOM decoder, which keeps the last.
class seen_fields {
 public:
  bool first(unsigned bit) {
    if (mask_ & (1u << bit)) return false;
    mask_ |= 1u << bit;
    return true;
  }

 private:
  unsigned mask_ = 0;
};

// The readers below treat null as absent, like the DOM decoder.
bool opt_string(text_reader& r, std::string& out) {
  return r.null() || r.string(out);
}
bool opt_integer(text_reader& r, std::int64_t& out) {
  return r.null() || r.integer(out);
}
bool opt_integer(text_reader& r, std::optional<std::int64_t>& out) {
  if (r.null()) return true;
  std::int64_t v;
  if (!r.integer(v)) return false;
  out = v;
  return true;
}
bool opt_number(text_reader& r, double& out) {
  return r.null() || r.number(out);
}
bool opt_boolean(text_reader& r, bool& out) {
  return r.null() || r.boolean(out);
}

// An open-ended member, as a JSON value in the default memory resource.
bool json_member(text_reader& r, json::value& out) {
  std::string_view text;
  if (!r.raw(text)) return false;
  boost::system::error_code ec;
  out = json::parse(text, ec, json::storage_ptr(), mira::detail::host_parse_options());
  return !ec;
}
template <class T, T* (json::value::*As)() noexcept>
bool json_member_of(text_reader& r, T& out) {
  if (r.null()) return true;
  json::value v;
  if (!json_member(r, v)) return false;
  auto* typed = (v.*As)();
  if (!typed) return false;
  out = std::move(*typed);
  return true;
}
bool array_member(text_reader& r, json::array& out) {
  return json_member_of<json::array, &json::value::if_array>(r, out);
}
bool object_member(text_reader& r, json::object& out) {
  return json_member_of<json::object, &json::value::if_object>(r, out);
}

bool read_strings(text_reader& r, std::vector<std::string>& out) {
  if (r.null()) return true;
  return r.array([&] {
    out.emplace_back();
    return r.string(out.back());
  });
}

bool read_axis(text_reader& r, axis_params& out) {
  if (r.null()) return true;
  std::string value;
  return r.object([&](std::string_view k) {
    return r.string(value) && out.emplace(std::string(k), std::move(value)).second;
  });
}

bool read_score(text_reader& r, score& s) {
  seen_fields seen;
  return r.object([&](std::string_view k) {
    if (k == "scorer") return seen.first(0) && opt_string(r, s.scorer);
    if (k == "value") return seen.first(1) && opt_number(r, s.value);
    if (k == "pass") return seen.first(2) && opt_boolean(r, s.pass);
    if (k == "na") return seen.first(3) && opt_boolean(r, s.na);
    if (k == "reason") return seen.first(4) && opt_string(r, s.reason);
    return r.skip();
  });
}

bool read_usage(text_reader& r, usage& u) {
  if (r.null()) return true;
  seen_fields seen;
  return r.object([&](std::string_view k) {
    if (k == "input_tokens") return seen.first(0) && opt_integer(r, u.input_tokens);
    if (k == "output_tokens") return seen.first(1) && opt_integer(r, u.output_tokens);
    if (k == "cache_read_tokens") return seen.first(2) && opt_integer(r, u.cache_read_tokens);
    if (k == "reasoning_tokens") return seen.first(3) && opt_integer(r, u.reasoning_tokens);
    if (k == "cost_usd") return seen.first(4) && opt_number(r, u.cost_usd);
    return r.skip();
  });
}

bool read_timing(text_reader& r, timing& t) {
  if (r.null()) return true;
  seen_fields seen;
  return r.object([&](std::string_view k) {
    if (k == "duration_ms") return seen.first(0) && opt_integer(r, t.duration_ms);
    if (k == "time_to_first_token_ms")
      return seen.first(1) && opt_integer(r, t.time_to_first_token_ms);
    return r.skip();
  });
}

bool read_metrics(text_reader& r, std::map<std::string, double>& out) {
  if (r.null()) return true;
  return r.object([&](std::string_view k) {
    double v;
    return r.number(v) && out.emplace(std::string(k), v).second;
  });
}

bool read_transcript(text_reader& r, transcript_summary& t) {
  if (r.null()) return true;
  seen_fields seen;
  std::string kind;
  bool ok = r.object([&](std::string_view k) {
    if (k == "final_response") return seen.first(0) && opt_string(r, t.final_response);
    if (k == "iterations") return seen.first(1) && opt_integer(r, t.iterations);
    if (k == "tool_calls_count") return seen.first(2) && opt_integer(r, t.tool_calls_count);
    if (k == "tool_calls") return seen.first(3) && read_strings(r, t.tool_calls);
    if (k == "usage") return seen.first(4) && read_usage(r, t.usage);
    if (k == "timing") return seen.first(5) && read_timing(r, t.timing);
    if (k == "metrics") return seen.first(6) && read_metrics(r, t.metrics);
    if (k == "metadata") return seen.first(7) && object_member(r, t.metadata);
    if (k == "error") {
      if (!seen.first(8)) return false;
      if (r.null()) return true;
      t.error.emplace();
      return r.string(*t.error);
    }
    if (k == "error_kind") return seen.first(9) && opt_string(r, kind);
    if (k == "output") return seen.first(10) && array_member(r, t.output);
    return r.skip();
  });
  t.error_kind = kind == "infra" ? error_kind::infra : error_kind::subject;
  return ok;
}

bool read_run_result(text_reader& r, run_result& res) {
  seen_fields seen;
  bool ok = r.object([&](std::string_view k) {
    if (k == "eval") return seen.first(0) && opt_string(r, res.eval);
    if (k == "sample") return seen.first(1) && opt_string(r, res.sample);
    if (k == "target") return seen.first(2) && opt_string(r, res.target);
    if (k == "params") return seen.first(3) && read_axis(r, res.params);
    if (k == "trial") return seen.first(4) && opt_integer(r, res.trial) && res.trial >= 0;
    if (k == "trials") return seen.first(5) && opt_integer(r, res.trials) && res.trials >= 0;
    if (k == "seed") return seen.first(6) && opt_integer(r, res.seed);
    if (k == "input") return seen.first(7) && array_member(r, res.input);
    if (k == "expected") {
      if (!seen.first(8)) return false;
      if (r.null()) return true;
      res.expected.emplace();
      return json_member(r, *res.expected);
    }
    if (k == "passed") return seen.first(9) && opt_boolean(r, res.passed);
    if (k == "aggregate") return seen.first(10) && opt_number(r, res.aggregate);
    if (k == "scores") {
      if (!seen.first(11)) return false;
      if (r.null()) return true;
      return r.array([&] { return read_score(r, res.scores.emplace_back()); });
    }
    if (k == "transcript") return seen.first(12) && read_transcript(r, res.transcript);
    if (k == "skipped") return seen.first(13) && opt_boolean(r, res.skipped);
    return r.skip();
  });
  if (res.trials == 0) res.trials = 1;
  return ok && r.at_end();
}

// Whatever the text reader does not take: the DOM decoder's answer or error.
decoded<run_result> through_dom(std::string_view text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec, json::storage_ptr(), mira::detail::host_parse_options());
  if (ec) return tl::make_unexpected(decode_error{"", "not valid JSON (" + ec.message() + ")"});
  return decode_run_result(v, std::string(text));
}

}  // namespace

decoded<run_result> decode_run_result_text(std::string_view text) {
  if (mira::detail::scan_json_value(text, mira::detail::skip_json_ws(text, 0)) ==
      mira::detail::json_scan_failed)
    return through_dom(text);
  run_result res;
  if (auto e = detail::decode_valid_run_result_text(text, res)) return tl::make_unexpected(*e);
  return res;
}

std::optional<decode_error> detail::decode_valid_run_result_text(std::string_view text,
                                                                 run_result& out) {
  text_reader r(text);
  if (read_run_result(r, out)) {
    out.raw_json.assign(text.data(), text.size());
    return std::nullopt;
  }
  auto res = through_dom(text);
  if (!res) return std::move(res.error());
  out = std::move(*res);
  return std::nullopt;
}

}  // namespace mira::protocol
