// Pages of a saved run's cases and one case whole (see case_query.hpp). A page is the `limit`
// smallest cases after the cursor in the page's order, kept in a heap while every record is read
// once: memory is the page's, whatever the run's size.
#include <mira/store/case_query.hpp>

#include <mira/store/artifacts.hpp>
#include <mira/store/files.hpp>

#include "plan/natural_order.hpp"
#include "store/file_helpers.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace mira::store {

namespace json = boost::json;

namespace {

constexpr std::array<std::string_view, 5> sort_names = {"key", "latency", "cost", "tokens",
                                                        "score"};

const json::value* member(const json::object& o, std::string_view name) {
  auto it = o.find(name);
  return it == o.end() ? nullptr : &it->value();
}

const json::object* object_member(const json::object& o, std::string_view name) {
  auto* v = member(o, name);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

std::optional<double> number_member(const json::object* o, std::string_view name) {
  if (!o) return std::nullopt;
  auto* v = member(*o, name);
  if (!v || !v->is_number()) return std::nullopt;
  return v->to_number<double>();
}

std::optional<std::int64_t> int_member(const json::object* o, std::string_view name) {
  auto d = number_member(o, name);
  if (!d) return std::nullopt;
  return static_cast<std::int64_t>(*d);
}

std::string string_member(const json::object* o, std::string_view name) {
  if (!o) return {};
  auto* v = member(*o, name);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

// The text a person reads of an input: its strings, text parts and messages' content, a line
// each; other values as JSON.
void append_text(std::string& out, const json::value& v, std::size_t budget) {
  if (out.size() >= budget) return;
  auto line = [&](std::string_view s) {
    if (!out.empty()) out += '\n';
    out.append(s.substr(0, budget - std::min(budget, out.size())));
  };
  if (v.is_string()) return line(v.get_string());
  if (v.is_array()) {
    for (auto& e : v.get_array()) append_text(out, e, budget);
    return;
  }
  if (v.is_object()) {
    auto& o = v.get_object();
    if (auto* t = member(o, "text"); t && t->is_string()) return line(t->get_string());
    if (auto* c = member(o, "content")) return append_text(out, *c, budget);
  }
  line(json::serialize(v));
}

// `s` cut to `chars` code points at most, with "…" when cut.
std::string preview(std::string s, std::size_t chars = preview_chars) {
  std::size_t at = 0, n = 0;
  while (at < s.size() && n < chars) {
    ++at;
    while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) ++at;
    ++n;
  }
  if (at < s.size()) {
    s.resize(at);
    s += "\xE2\x80\xA6";
  }
  return s;
}

bool contains_folded(std::string_view hay, std::string_view needle) {
  auto fold = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                     [&](char a, char b) { return fold(a) == fold(b); }) != hay.end();
}

bool listed(const std::vector<std::string>& allowed, std::string_view v) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

// The full texts the search looks in (a summary keeps only their first characters).
struct case_texts {
  std::string input, response;
};

case_texts texts_of(const json::object& r) {
  case_texts t;
  if (auto* in = member(r, "input")) append_text(t.input, *in, std::size_t(1) << 20);
  t.response = string_member(object_member(r, "transcript"), "final_response");
  return t;
}

bool passes(const case_filter& f, const case_summary& s, const json::object& record) {
  if (!listed(f.statuses, s.status) || !listed(f.evals, s.eval) || !listed(f.targets, s.target))
    return false;
  if (f.trial && *f.trial != s.trial) return false;
  if (!f.tags.empty() && std::none_of(f.tags.begin(), f.tags.end(), [&](const std::string& t) {
        return std::find(s.tags.begin(), s.tags.end(), t) != s.tags.end();
      }))
    return false;
  if ((f.score_min || f.score_max) && !s.score) return false;
  if (f.score_min && *s.score < *f.score_min) return false;
  if (f.score_max && *s.score > *f.score_max) return false;
  if (f.text.empty()) return true;
  auto t = texts_of(record);
  return contains_folded(t.input, f.text) || contains_folded(t.response, f.text);
}

// How many cases pass a filter of statuses alone (or none), counted from the states the reader
// knows without reading a record; nothing when the filter asks more, or a state is not known.
std::optional<std::size_t> count_by_status(const run_reader& run, const case_filter& f) {
  if (!f.evals.empty() || !f.targets.empty() || !f.tags.empty() || f.trial || f.score_min ||
      f.score_max || !f.text.empty())
    return std::nullopt;
  std::size_t n = 0;
  for (std::size_t i = 0; i < run.size(); ++i) {
    auto st = run.status(i);
    if (!st) return std::nullopt;
    if (listed(f.statuses, schedule::to_string(*st))) ++n;
  }
  return n;
}

std::optional<double> sort_value(const case_summary& s, case_sort by) {
  switch (by) {
    case case_sort::key:
      return std::nullopt;
    case case_sort::latency:
      return s.latency_ms;
    case case_sort::cost:
      return s.cost_usd;
    case case_sort::tokens:
      if (!s.tokens) return std::nullopt;
      return static_cast<double>(*s.tokens);
    case case_sort::score:
      return s.score;
  }
  return std::nullopt;
}

// Where a case stands in a page's order: by value (cases without one last), then by key.
struct position {
  std::optional<double> value;
  std::string key;
};

struct order {
  bool descending;
  bool operator()(const position& a, const position& b) const {
    if (a.value.has_value() != b.value.has_value()) return a.value.has_value();
    if (a.value && *a.value != *b.value)
      return descending ? *a.value > *b.value : *a.value < *b.value;
    return plan::natural_less(a.key, b.key);
  }
};

// A cursor is "<sort>:<value>:<key>" (the value empty for the key order or a case without one),
// printed with enough digits to read the same double back.
std::string make_cursor(case_sort by, const position& p) {
  std::string c(to_string(by));
  c += ':';
  if (p.value) {
    std::array<char, 32> buf{};
    auto r = std::to_chars(buf.data(), buf.data() + buf.size(), *p.value);
    c.append(buf.data(), r.ptr);
  }
  c += ':';
  return c + p.key;
}

tl::expected<std::optional<position>, query_error> parse_cursor(const case_query& q) {
  if (q.cursor.empty()) return std::nullopt;
  auto bad = [&](std::string why) { return tl::unexpected(query_error{"cursor", std::move(why)}); };
  auto first = q.cursor.find(':');
  auto second = first == std::string::npos ? first : q.cursor.find(':', first + 1);
  if (second == std::string::npos)
    return bad("not a cursor this server gave (pass a page's next_cursor as it is)");
  auto by = std::string_view(q.cursor).substr(0, first);
  if (by != to_string(q.sort))
    return bad("the cursor is of a page sorted by '" + std::string(by) + "', not by '" +
               std::string(to_string(q.sort)) + "'");
  position p;
  p.key = q.cursor.substr(second + 1);
  auto v = std::string_view(q.cursor).substr(first + 1, second - first - 1);
  if (!v.empty()) {
    double d = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), d);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size())
      return bad("its value '" + std::string(v) + "' is not a number");
    p.value = d;
  }
  return p;
}

}  // namespace

std::string_view to_string(case_sort s) noexcept {
  return sort_names[static_cast<std::size_t>(s)];
}

std::optional<case_sort> case_sort_from(std::string_view name) noexcept {
  for (std::size_t i = 0; i < sort_names.size(); ++i)
    if (sort_names[i] == name) return static_cast<case_sort>(i);
  return std::nullopt;
}

case_summary summarize_case(const saved_case& c) {
  const auto& r = c.record;
  auto* transcript = object_member(r, "transcript");
  auto* usage = transcript ? object_member(*transcript, "usage") : nullptr;
  case_summary s;
  s.key = c.key;
  s.eval = string_member(&r, "eval");
  s.sample = string_member(&r, "sample");
  s.target = string_member(&r, "target");
  if (auto* p = object_member(r, "params")) s.params = *p;
  s.trial = int_member(&r, "trial").value_or(0);
  if (auto* tags = member(r, "tags"); tags && tags->is_array())
    for (auto& t : tags->get_array())
      if (t.is_string()) s.tags.emplace_back(t.get_string());
  s.status = string_member(&r, "status");
  s.attempts = int_member(&r, "attempts").value_or(0);
  s.latency_ms = number_member(&r, "latency_ms");
  if (s.status == "passed" || s.status == "failed") s.score = number_member(&r, "aggregate");
  s.cost_usd = number_member(usage, "cost_usd");
  auto in = int_member(usage, "input_tokens"), out = int_member(usage, "output_tokens");
  if (in || out) s.tokens = in.value_or(0) + out.value_or(0);
  s.tool_calls = int_member(transcript, "tool_calls_count").value_or(0);
  if (auto* t = transcript ? object_member(*transcript, "trajectory") : nullptr)
    if (auto* steps = member(*t, "steps"); steps && steps->is_array())
      s.steps = steps->get_array().size();
  std::string input;
  if (auto* v = member(r, "input")) append_text(input, *v, preview_chars * 4 + 4);
  s.input_preview = preview(std::move(input));
  s.response_preview = preview(string_member(transcript, "final_response"));
  s.message = string_member(&r, "host_message");
  if (s.message.empty()) s.message = preview(string_member(transcript, "error"), 400);
  return s;
}

tl::expected<case_page, query_error> query_cases(const run_reader& run, const case_query& q,
                                                 const std::function<bool()>& stop) {
  if (q.limit < 1 || q.limit > case_query::max_page_size)
    return tl::unexpected(
        query_error{"limit", "a number from 1 to " + std::to_string(case_query::max_page_size)});
  auto after = parse_cursor(q);
  if (!after) return tl::unexpected(after.error());
  const order less{q.descending && q.sort != case_sort::key};
  const bool by_key = q.sort == case_sort::key;
  // In key order, the order of the visit: the page is its first cases after the cursor, and
  // when the reader knows how many match, the visit ends with the page.
  const auto counted = by_key ? count_by_status(run, q.filter) : std::nullopt;
  case_page page;
  page.unreadable = run.unreadable();
  // The page so far, largest last in `less`: a max-heap of at most limit + 1 cases (one more
  // than the page says whether a next page exists).
  std::vector<std::pair<position, case_summary>> kept;
  auto heap_less = [&](const auto& a, const auto& b) { return less(a.first, b.first); };
  page.problems = run.visit(
      [&](std::size_t, const saved_case& c) {
        if (stop && stop()) {
          page.stopped = true;
          return false;
        }
        auto s = summarize_case(c);
        if (!passes(q.filter, s, c.record)) return true;
        if (!counted) ++page.matched;
        position p{sort_value(s, q.sort), s.key};
        if (*after && !less(**after, p)) return true;
        if (kept.size() == q.limit + 1) {
          if (!less(p, kept.front().first)) return true;
          std::pop_heap(kept.begin(), kept.end(), heap_less);
          kept.pop_back();
        }
        kept.emplace_back(std::move(p), std::move(s));
        std::push_heap(kept.begin(), kept.end(), heap_less);
        return !counted || kept.size() <= q.limit;
      },
      [&](std::size_t i, std::string_view key) {
        // Cases before the cursor are counted, and so read, unless the count is known.
        if (counted && *after && !plan::natural_less((*after)->key, key)) return false;
        // A case whose state the reader knows is read only when the filter can take it.
        auto st = q.filter.statuses.empty() ? std::nullopt : run.status(i);
        return !st || listed(q.filter.statuses, schedule::to_string(*st));
      });
  if (counted) page.matched = *counted;
  std::sort_heap(kept.begin(), kept.end(), heap_less);
  if (kept.size() > q.limit) {
    kept.pop_back();
    page.next_cursor = make_cursor(q.sort, kept.back().first);
  }
  page.cases.reserve(kept.size());
  for (auto& [p, s] : kept) page.cases.push_back(std::move(s));
  return page;
}

namespace {

// The lines of events.ndjson for `key` (each starts {"key":<key>, as the store writes them),
// read through a window; never through a link.
void read_events(const run_reader& run, std::string_view key, std::size_t max_events,
                 case_detail& d) {
  int dir = ::open(run.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = dir < 0 ? -1 : detail::open_beneath(dir, "events.ndjson", O_RDONLY | O_CLOEXEC);
  int err = errno;
  if (dir >= 0) ::close(dir);
  if (fd < 0) {
    if (err != ENOENT) d.events_problem = detail::open_failure(run.path() / "events.ndjson", err);
    return;
  }
  const std::string prefix = "{\"key\":" + json::serialize(json::string(key)) + ",";
  std::string buf, line;
  std::array<char, 1 << 16> chunk{};
  auto take = [&](std::string_view l) {
    if (l.substr(0, prefix.size()) != prefix) return;
    if (d.events.size() == max_events) {
      d.events_cut = true;
      return;
    }
    boost::system::error_code ec;
    auto v = json::parse(l, ec);
    if (!ec && v.is_object()) d.events.push_back(std::move(v));
  };
  for (;;) {
    auto n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      d.events_problem = run.path().string() + "/events.ndjson: " + std::strerror(errno);
      break;
    }
    if (n == 0) break;
    buf.append(chunk.data(), static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (auto nl = buf.find('\n'); nl != std::string::npos; nl = buf.find('\n', start)) {
      take(std::string_view(buf).substr(start, nl - start));
      start = nl + 1;
    }
    buf.erase(0, start);
  }
  ::close(fd);
}

// The trajectory of a case: its record's, or its scored artifact's.
void find_trajectory(const run_reader& run, case_detail& d) {
  auto trajectory_of = [](const json::object& o) -> const json::value* {
    auto* t = object_member(o, "transcript");
    return t ? member(*t, "trajectory") : nullptr;
  };
  if (auto* t = trajectory_of(d.record.record)) {
    d.trajectory = *t;
    d.trajectory_source = "record";
    return;
  }
  auto* dir = run.meta().extra.if_contains("scored_artifacts");
  if (!dir || !dir->is_string()) return;
  auto artifacts = artifact_dir::open(std::string(dir->get_string()));
  if (!artifacts) return;
  auto file = artifacts->file_for(d.record.key);
  auto artifact = read_json_object(file);
  // The artifact must say it is this case's: a folder copied from elsewhere may name any path.
  if (!artifact || string_member(&*artifact, "key") != d.record.key) return;
  if (auto* t = trajectory_of(*artifact)) {
    d.trajectory = *t;
    d.trajectory_source = file.string();
  }
}

}  // namespace

std::optional<case_detail> read_case(const run_reader& run, std::string_view key,
                                     std::size_t max_events) {
  std::optional<case_detail> d;
  auto at = run.find(key);
  if (!at) return d;
  run.visit(
      [&](std::size_t, const saved_case& c) {
        d.emplace();
        d->record = c;
        return false;
      },
      [&](std::size_t i, std::string_view) { return i == *at; });
  if (!d) return d;
  find_trajectory(run, *d);
  read_events(run, key, max_events, *d);
  return d;
}

}  // namespace mira::store
