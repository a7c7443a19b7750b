// Rendering (see render.hpp).
#include <mira/report/render.hpp>

#include <mira/report/escape.hpp>

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include "plan/natural_order.hpp"
#include "report/html_report.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

namespace mira::report {

namespace json = boost::json;
using schedule::case_state;

namespace {

std::string_view badge(case_state s) {
  switch (s) {
    case case_state::passed:
      return "PASS";
    case case_state::failed:
      return "FAIL";
    case case_state::na:
      return "N/A ";
    case case_state::skipped:
      return "SKIP";
    case case_state::cancelled:
      return "STOP";
    case case_state::error:
      return "ERR ";
    case case_state::executed:
      return "EXEC";
  }
  return "?   ";
}

std::string_view badge_colour(case_state s) {
  switch (s) {
    case case_state::passed:
      return "\x1b[1;32m";
    case case_state::failed:
      return "\x1b[1;31m";
    case case_state::error:
      return "\x1b[1;35m";
    case case_state::skipped:
      return "\x1b[33m";
    default:
      return "\x1b[2m";
  }
}

// Keys can be kilobytes long; a table line shows the start and the end.
std::string shown_key(std::string_view key) {
  constexpr std::size_t max = 160;
  if (key.size() <= max) return printable(key);
  return printable(key.substr(0, max - 40)) + "…" + printable(key.substr(key.size() - 30));
}

// Terminal columns of printable text: one per code point (UTF-8 continuation bytes take none).
std::size_t display_width(std::string_view text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

std::string fraction(const aggregate::rate& r) {
  return r.scored ? std::to_string(r.passed) + "/" + std::to_string(r.scored) : "-";
}

// Whole percents, except where rounding would hide the last failure or the only pass: a rate
// below 1 never reads 100%, one above 0 never 0% (99.85% is 99.8%, 0.02% is 0.1%).
std::string percent(double v) {
  double p = v * 100;
  char buf[16];
  if (p < 100 && std::round(p) >= 100)
    std::snprintf(buf, sizeof buf, "%.1f%%", std::floor(p * 10) / 10);
  else if (p > 0 && std::round(p) <= 0)
    std::snprintf(buf, sizeof buf, "%.1f%%", std::ceil(p * 10) / 10);
  else
    std::snprintf(buf, sizeof buf, "%.0f%%", p);
  return buf;
}

std::string fixed(double v, int digits = 2) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A case's score and note, as its table line shows them.
struct shown {
  std::string score, note;
};

shown shown_of(const schedule::case_record& r) {
  shown cell{{}, r.message};
  if (r.state != case_state::passed && r.state != case_state::failed) return cell;
  auto result = r.result();
  if (!result) return cell;
  cell.score = fixed(result->aggregate);
  if (cell.note.empty() && r.state == case_state::failed)
    for (auto& sc : result->scores)
      if (!sc.na && !sc.pass) {
        cell.note = sc.scorer + ": " + sc.reason;
        break;
      }
  return cell;
}

// One line per case; columns: badge, key, score, note. Two passes (widths, then lines) rather
// than every line kept: a run can have a million cases. Each pass decodes the results it shows.
void print_cases(std::FILE* out, const case_source& cases, bool colour) {
  std::size_t key_width = 0, score_width = 0;
  cases.visit_keys([&](std::size_t, std::string_view key) {
    key_width = std::max(key_width, display_width(shown_key(key)));
    return true;
  });
  cases.visit([&](std::size_t, const plan::planned_case&, const schedule::case_record& r) {
    score_width = std::max(score_width, shown_of(r).score.size());
    return true;
  });
  std::string row;
  cases.visit([&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
    auto key = shown_key(c.key);
    const auto what = shown_of(r);
    row.clear();
    if (colour) row += badge_colour(r.state);
    row += badge(r.state);
    if (colour) row += "\x1b[0m";
    row += "  ";
    row += key;
    row.append(key_width - display_width(key), ' ');
    if (score_width) {
      row += "  ";
      row.append(score_width - what.score.size(), ' ');
      row += what.score;
    }
    if (!what.note.empty()) row += "  (" + printable(what.note) + ")";
    if (!r.retried.empty()) row += "  [" + std::to_string(r.retried.size()) + " retries]";
    while (!row.empty() && row.back() == ' ') row.pop_back();
    row += '\n';
    std::fputs(row.c_str(), out);
    return true;
  });
}

// The eval x target matrix.
void print_matrix(std::FILE* out, const aggregate::summary& s) {
  std::size_t w = 4;
  for (auto& e : s.eval_order) w = std::max(w, printable(e).size());
  std::fprintf(out, "\n-- matrix (passed/scored) --\n%-*s", static_cast<int>(w), "");
  for (auto& t : s.target_order)
    std::fprintf(out, "  %*s", static_cast<int>(std::max<std::size_t>(7, printable(t).size())),
                 printable(t).c_str());
  std::fprintf(out, "\n");
  for (auto& e : s.eval_order) {
    std::fprintf(out, "%-*s", static_cast<int>(w), printable(e).c_str());
    for (auto& t : s.target_order) {
      auto it = s.matrix.find({e, t});
      std::fprintf(out, "  %*s", static_cast<int>(std::max<std::size_t>(7, printable(t).size())),
                   it == s.matrix.end() ? "-" : fraction(it->second).c_str());
    }
    std::fprintf(out, "\n");
  }
}

// One rate's line: passed/scored, the rate and its 95% interval, or "-" when nothing was scored.
void print_rate(std::FILE* out, const std::string& name, const aggregate::rate& r) {
  if (!r.scored) {
    std::fprintf(out, "%s  -\n", printable(name).c_str());
    return;
  }
  auto ci = r.ci();
  std::fprintf(out, "%s  %s  %s  [%s, %s]\n", printable(name).c_str(), fraction(r).c_str(),
               percent(r.value()).c_str(), percent(ci.low).c_str(), percent(ci.high).c_str());
}

void print_rates(std::FILE* out, const char* title, const std::vector<std::string>& order,
                 const std::map<std::string, aggregate::rate>& m) {
  std::fprintf(out, "\n-- %s (passed/scored, rate, 95%% interval) --\n", title);
  for (auto& name : order) print_rate(out, name, m.at(name));
}

// pass@k and the spread of each case run several times.
void print_trials(std::FILE* out, const aggregate::summary& s) {
  if (s.trials.empty()) return;
  std::fprintf(out, "\n-- trials (pass@k) --\n");
  for (auto& t : s.trials) {
    std::string line = printable(t.logical_key) + "  " + std::to_string(t.passed) + "/" +
                       std::to_string(t.scored) + " passed";
    if (t.scored) line += " · rate " + percent(t.pass_rate().value());
    for (std::size_t k = 0; k < t.pass_at.size(); ++k)
      if (t.pass_at[k]) line += " · pass@" + std::to_string(k + 1) + " " + fixed(*t.pass_at[k]);
    if (t.scored) line += " · mean " + fixed(t.mean) + " · sd " + fixed(t.stddev, 3);
    std::fprintf(out, "%s\n", line.c_str());
  }
}

// Tokens, cost, retries, latency and metric means over every case.
void print_totals(std::FILE* out, const aggregate::summary& s) {
  auto& t = s.total;
  std::fprintf(out, "\n-- totals --\n");
  std::fprintf(out,
               "tokens: %lld in, %lld out, %lld cache read, %lld reasoning · cost $%.4f · %lld "
               "tool calls · study time %.1f s\n",
               static_cast<long long>(t.input_tokens), static_cast<long long>(t.output_tokens),
               static_cast<long long>(t.cache_read_tokens),
               static_cast<long long>(t.reasoning_tokens), t.cost_usd,
               static_cast<long long>(t.tool_calls), static_cast<double>(t.duration_ms) / 1000);
  if (t.retries) {
    std::string causes;
    for (auto& [c, n] : t.retry_causes)
      causes += (causes.empty() ? "" : ", ") + c + " " + std::to_string(n);
    std::fprintf(out, "retries: %zu (%s)\n", t.retries, causes.c_str());
  }
  for (auto& [target, l] : s.latency_by_target) {
    std::fprintf(out, "latency %s: p50 %.3f s · p95 %.3f s · p99 %.3f s", printable(target).c_str(),
                 l.p50, l.p95, l.p99);
    if (l.ttft_n)
      std::fprintf(out, " · ttft p50 %.0f ms · p95 %.0f ms", l.ttft_p50_ms, l.ttft_p95_ms);
    std::fprintf(out, "\n");
  }
  for (auto& [k, v] : t.metric_means)
    std::fprintf(out, "metric %s: mean %.4g\n", printable(k).c_str(), v);
}

// The last lines: the count of each state, the overall pass rate, the time, and what is missing.
void print_outcome(std::FILE* out, const schedule::run_report& report, const aggregate::summary& s,
                   std::size_t total) {
  auto ci = s.overall.ci();
  std::string executed;
  if (auto n = s.count(case_state::executed)) executed = ", " + std::to_string(n) + " executed";
  // A rate of nothing is not 0 %: say that nothing was scored.
  auto rate = s.overall.scored ? "pass rate " + percent(s.overall.value()) + " [" +
                                     percent(ci.low) + ", " + percent(ci.high) + "]"
                               : std::string("pass rate – (no scored cases)");
  std::fprintf(out,
               "\n%zu passed, %zu failed, %zu n/a, %zu skipped, %zu cancelled, %zu errors%s (%zu "
               "cases) · %s · %.2f s\n",
               s.count(case_state::passed), s.count(case_state::failed), s.count(case_state::na),
               s.count(case_state::skipped), s.count(case_state::cancelled),
               s.count(case_state::error), executed.c_str(), total, rate.c_str(), report.seconds);
  if (auto incomplete = incompleteness(report, s); !incomplete.empty())
    std::fprintf(out, "%s\n", printable(incomplete).c_str());
}

}  // namespace

void print_table(std::FILE* out, const plan::plan& p, const schedule::run_report& report,
                 const aggregate::summary& s, bool colour) {
  print_table(out, memory_cases(p, report), report, s, colour);
}

void print_table(std::FILE* out, const case_source& cases, const schedule::run_report& report,
                 const aggregate::summary& s, bool colour) {
  print_cases(out, cases, colour);
  // A session keeps the records of its first cases only; the summary covers them all.
  std::size_t total = 0;
  for (auto n : s.counts) total += n;
  if (cases.size() < total)
    std::fprintf(out,
                 "... the first %zu of %zu cases are listed (mira report RUN_ID --format csv lists "
                 "them all; mira report RUN_ID FILTER the ones whose key contains FILTER)\n",
                 cases.size(), total);
  print_matrix(out, s);
  print_rates(out, "per eval", s.eval_order, s.per_eval);
  print_rates(out, "per target", s.target_order, s.per_target);
  print_trials(out, s);
  if (!s.group_by.empty()) {
    std::fprintf(out, "\n-- by %s (passed/scored, 95%% interval) --\n",
                 printable(s.group_by).c_str());
    for (auto& [v, r] : s.groups) print_rate(out, v, r);
  }
  print_totals(out, s);
  print_outcome(out, report, s, total);
}

std::string incompleteness(const schedule::run_report& report, const aggregate::summary& s) {
  std::size_t planned = 0;
  for (auto n : s.counts) planned += n;
  const auto unfinished = s.count(case_state::cancelled);
  std::string out;
  if (unfinished > 0)
    out = std::to_string(unfinished) + " of " + std::to_string(planned) +
          " planned case(s) not finished";
  if (report.stopped == schedule::stop_reason::none) return out;
  const std::string reason(to_string(report.stopped));
  out += (out.empty() ? "" : ": ") + std::string("stopped (") + reason + ")";
  if (!report.stop_message.empty() && report.stop_message != reason)
    out += ": " + report.stop_message;
  return out;
}

}  // namespace mira::report

namespace mira::report {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string params_text(const protocol::axis_params& p) {
  std::string out;
  for (auto& [k, v] : p) out.append(out.empty() ? "" : ";").append(k).append("=").append(v);
  return out;
}

void csv_report(const case_source& cases, const text_sink& sink) {
  sink(
      "key,eval,sample,target,params,trial,trials,seed,status,passed,aggregate,attempts,"
      "latency_ms,input_tokens,output_tokens,cache_read_tokens,reasoning_tokens,cost_usd,"
      "duration_ms,time_to_first_token_ms,tool_calls,error,error_kind,final_response\r\n");
  std::string out;
  cases.visit([&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
    const auto result = r.result();
    const protocol::run_result* res = result ? &*result : nullptr;
    std::vector<std::string> f = {c.key,
                                  c.params.eval,
                                  c.params.sample,
                                  c.params.target,
                                  params_text(c.params.params),
                                  std::to_string(c.params.trial),
                                  std::to_string(c.params.trials),
                                  c.params.seed ? std::to_string(*c.params.seed) : "",
                                  std::string(to_string(r.state)),
                                  res && res->passed ? "true" : "false",
                                  res ? number(res->aggregate) : "",
                                  std::to_string(r.attempts),
                                  r.attempts ? number(r.latency_seconds * 1000) : ""};
    if (res) {
      auto& t = res->transcript;
      f.insert(
          f.end(),
          {std::to_string(t.usage.input_tokens), std::to_string(t.usage.output_tokens),
           std::to_string(t.usage.cache_read_tokens), std::to_string(t.usage.reasoning_tokens),
           number(t.usage.cost_usd),
           t.timing.duration_ms ? std::to_string(*t.timing.duration_ms) : "",
           t.timing.time_to_first_token_ms ? std::to_string(*t.timing.time_to_first_token_ms) : "",
           std::to_string(t.tool_calls_count), t.error.value_or(r.message),
           t.error_kind == protocol::error_kind::infra ? "infra" : "", t.final_response});
    } else {
      f.insert(f.end(), {"", "", "", "", "", "", "", "", r.message, "", ""});
    }
    out.clear();
    for (std::size_t k = 0; k < f.size(); ++k) out += (k ? "," : "") + csv_field(f[k]);
    out += "\r\n";
    sink(out);
    return true;
  });
}

std::string junit_report(const case_source& cases, const schedule::run_report& report,
                         const aggregate::summary& s) {
  // One pass over the cases, each eval's test cases gathered apart, then the suites in the
  // summary's eval order.
  struct suite {
    std::size_t tests = 0, failures = 0, errors = 0, skipped = 0;
    double time = 0;
    std::string cases;
  };
  std::map<std::string, suite, std::less<>> suites;
  suite* last = nullptr;
  std::string last_eval;
  cases.visit([&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
    const std::string& eval = c.params.eval;
    if (!last || last_eval != eval) {
      last = &suites[eval];
      last_eval = eval;
    }
    auto& su = *last;
    ++su.tests;
    su.time += r.latency_seconds;
    su.cases += "    <testcase classname=\"" + xml_text(eval) + "\" name=\"" + xml_text(c.key) +
                "\" time=\"" + number(r.latency_seconds) + "\">";
    const auto result = r.result();
    std::string why = r.message;
    if (why.empty() && result)
      for (auto& sc : result->scores)
        if (!sc.na && !sc.pass) why += (why.empty() ? "" : "; ") + sc.scorer + ": " + sc.reason;
    switch (r.state) {
      case case_state::passed:
        break;
      case case_state::failed:
        ++su.failures;
        su.cases += "<failure message=\"" + xml_text(why) + "\"/>";
        break;
      case case_state::error:
        ++su.errors;
        su.cases += "<error message=\"" + xml_text(why) + "\"/>";
        break;
      case case_state::na:
      case case_state::skipped:
      case case_state::cancelled:
      case case_state::executed: {
        ++su.skipped;
        // The state leads the message once ("cancelled: fail-fast" already says it).
        std::string state(to_string(r.state));
        auto message = why.empty()                       ? state
                       : why.rfind(state + ": ", 0) == 0 ? why
                                                         : state + ": " + why;
        su.cases += "<skipped message=\"" + xml_text(message) + "\"/>";
        break;
      }
    }
    if (result && !result->transcript.final_response.empty())
      su.cases += "<system-out>" + xml_text(result->transcript.final_response.substr(0, 2000)) +
                  "</system-out>";
    su.cases += "</testcase>\n";
    return true;
  });
  // JUnit's timestamp is a dateTime without a zone: the UTC time without its "Z".
  std::string timestamp;
  if (!report.started.empty())
    timestamp = " timestamp=\"" +
                xml_text(std::string_view(report.started).substr(0, report.started.find('Z'))) +
                "\"";
  suite all;
  std::string body;
  auto add_suite = [&](const std::string& name, const suite& su) {
    all.tests += su.tests, all.failures += su.failures, all.errors += su.errors;
    all.skipped += su.skipped, all.time += su.time;
    body += "  <testsuite name=\"" + xml_text(name) + "\" tests=\"" + std::to_string(su.tests) +
            "\" failures=\"" + std::to_string(su.failures) + "\" errors=\"" +
            std::to_string(su.errors) + "\" skipped=\"" + std::to_string(su.skipped) +
            "\" time=\"" + number(su.time) + "\"" + timestamp + ">\n" + su.cases +
            "  </testsuite>\n";
  };
  for (auto& eval : s.eval_order) {
    auto it = suites.find(eval);
    add_suite(eval, it == suites.end() ? suite{} : it->second);
  }
  // A run that did not finish its plan is one more test that errs, so no consumer counts it
  // green: the cases it never saved cannot be named, only counted.
  if (auto incomplete = incompleteness(report, s); !incomplete.empty()) {
    suite run;
    run.tests = run.errors = 1;
    run.cases =
        "    <testcase classname=\"mira run\" name=\"run complete\" time=\"0\"><error message=\"" +
        xml_text(incomplete) + "\"/></testcase>\n";
    add_suite("mira run", run);
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"mira\" tests=\"" +
         std::to_string(all.tests) + "\" failures=\"" + std::to_string(all.failures) +
         "\" errors=\"" + std::to_string(all.errors) + "\" skipped=\"" +
         std::to_string(all.skipped) + "\" time=\"" + number(report.seconds) + "\"" + timestamp +
         ">\n" + body + "</testsuites>\n";
}

std::string md_report(const case_source& cases, const schedule::run_report& report,
                      const aggregate::summary& s) {
  auto ci = s.overall.ci();
  std::string out = "## Mira eval results\n\n";
  if (!report.run_id.empty() || !report.study.empty())
    out += "Run " + md_cell(report.run_id.empty() ? "(not saved)" : report.run_id) +
           (report.study.empty() ? "" : " of study " + md_cell(report.study)) + "\n\n";
  if (auto incomplete = incompleteness(report, s); !incomplete.empty())
    out += "> **Incomplete:** " + md_cell(incomplete) + "\n\n";
  out += (s.overall.scored
              ? "**" + std::to_string(s.overall.passed) + " / " + std::to_string(s.overall.scored) +
                    " passed** (" + percent(s.overall.value()) + ", 95% interval " +
                    percent(ci.low) + "–" + percent(ci.high) + "); "
              : std::string("**no scored cases**; ")) +
         std::to_string(s.count(case_state::failed)) + " failed, " +
         std::to_string(s.count(case_state::error)) + " errors, " +
         std::to_string(s.count(case_state::na)) + " n/a, " +
         std::to_string(s.count(case_state::skipped)) + " skipped, " +
         std::to_string(s.count(case_state::cancelled)) + " cancelled\n\n| eval |";
  for (auto& t : s.target_order) out += " " + md_cell(t) + " |";
  out += "\n|---|";
  for (std::size_t k = 0; k < s.target_order.size(); ++k) out += "---|";
  out += "\n";
  for (auto& e : s.eval_order) {
    out += "| " + md_cell(e) + " |";
    for (auto& t : s.target_order) {
      auto it = s.matrix.find({e, t});
      out += " " + (it == s.matrix.end() ? std::string("-") : fraction(it->second)) + " |";
    }
    out += "\n";
  }
  std::string problems;
  cases.visit([&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
    if (r.state != case_state::failed && r.state != case_state::error) return true;
    problems += "| " + md_cell(c.key) + " | " + std::string(to_string(r.state)) + " | " +
                md_cell(failure_reason(r)) + " |\n";
    return true;
  });
  if (!problems.empty())
    out += "\n### Failures and errors\n\n| case | status | why |\n|---|---|---|\n" + problems;
  return out;
}

}  // namespace

std::string failure_reason(const schedule::case_record& r) {
  std::string why = r.message;
  if (why.empty())
    if (auto result = r.result()) {
      why = result->transcript.error.value_or("");
      // A case that failed its scores has no error: the first failing score says why.
      for (auto& sc : result->scores)
        if (why.empty() && !sc.pass && !sc.na)
          why = sc.reason.empty() ? sc.scorer : sc.scorer + ": " + sc.reason;
    }
  return why;
}

void render(const std::string& format, const plan::plan& p, const schedule::run_report& report,
            const aggregate::summary& s, const text_sink& out) {
  render(format, memory_cases(p, report), report, s, out);
}

void render(const std::string& format, const case_source& cases, const schedule::run_report& report,
            const aggregate::summary& s, const text_sink& out) {
  if (format == "csv") return csv_report(cases, out);
  if (format == "jsonl") {
    std::string line;
    cases.visit_lines([&](std::size_t, std::string_view text) {
      line.assign(text);
      line += '\n';
      out(line);
      return true;
    });
    return out(
        protocol::to_json_text(json::object{{"summary", aggregate::summary_json(s, report)}}) +
        "\n");
  }
  if (format == "junit") return out(junit_report(cases, report, s));
  if (format == "md") return out(md_report(cases, report, s));
  if (format == "html") return html_report(cases, report, s, "Mira eval report", out);
  // {"summary": ..., "cases": [...]}, a case at a time, in pieces of about 64 KiB.
  std::string item =
      "{\"summary\":" + protocol::to_json_text(aggregate::summary_json(s, report)) + ",\"cases\":[";
  cases.visit_lines([&](std::size_t i, std::string_view line) {
    if (i) item += ',';
    item += line;
    if (item.size() >= (std::size_t{64} << 10)) {
      out(item);
      item.clear();
    }
    return true;
  });
  item += "]}\n";
  out(item);
}

std::string render(const std::string& format, const plan::plan& p,
                   const schedule::run_report& report, const aggregate::summary& s) {
  std::string text;
  render(format, p, report, s, [&](std::string_view piece) { text += piece; });
  return text;
}

std::vector<store::report_file> run_files(const plan::plan& whole,
                                          const schedule::run_report& report,
                                          const aggregate::summary& s) {
  return run_files(std::make_shared<memory_cases>(whole, report), report, s);
}

std::string summary_document(std::size_t cases, const schedule::run_report& report,
                             const aggregate::summary& s) {
  json::object records{
      {"count", cases},
      {"where",
       "this run folder: cases/ (layout per_case) or segments/ (layout compact), as "
       "meta.json's \"layout\" says"},
      {"all", "mira report RUN_ID --format json"}};
  return protocol::to_json_text(json::object{{"summary", aggregate::summary_json(s, report)},
                                             {"records", std::move(records)}}) +
         "\n";
}

std::vector<store::report_file> run_files(std::shared_ptr<const case_source> whole,
                                          const schedule::run_report& report,
                                          const aggregate::summary& s) {
  // report.json is the summary and where the records are, not a second copy of every record
  // (the json format of render() is the whole report).
  std::size_t cases = 0;
  for (auto n : s.counts) cases += n;
  return {{"report.json",
           [cases, &report, &s](const std::function<void(std::string_view)>& sink) {
             sink(summary_document(cases, report, s));
           }},
          {"report.html", [whole, &report, &s](const std::function<void(std::string_view)>& sink) {
             html_report(*whole, report, s, "Mira eval report", sink);
           }}};
}

std::vector<store::report_file> saved_run_files(const store::run_reader& run,
                                                const schedule::run_report& header,
                                                const aggregate::summary& s) {
  return run_files(std::make_shared<saved_cases>(run), header, s);
}

void case_source::visit_lines(const line_fn& fn) const {
  std::string line;
  visit([&](std::size_t i, const plan::planned_case& c, const schedule::case_record& r) {
    line.clear();
    store::append_case_line(line, c, r);
    return fn(i, line);
  });
}

std::size_t memory_cases::size() const {
  return std::min(p_.cases.size(), report_.cases.size());
}

const std::vector<std::size_t>& memory_cases::order() const {
  const auto n = size();
  if (order_.size() == n) return order_;
  order_.resize(n);
  for (std::size_t i = 0; i < n; ++i) order_[i] = i;
  // Each key made once (a compact plan makes them on demand); a plan already in order is not
  // sorted.
  std::vector<std::string> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = p_.cases.key(i);
  auto by_key = [&keys](std::size_t a, std::size_t b) {
    return plan::natural_less(keys[a], keys[b]);
  };
  if (!std::is_sorted(order_.begin(), order_.end(), by_key))
    std::stable_sort(order_.begin(), order_.end(), by_key);
  return order_;
}

void memory_cases::visit(const case_fn& fn) const {
  std::size_t at = 0;
  for (auto i : order()) {
    const auto& c = p_.cases[i];  // may be a value (a compact plan): lives through the call
    if (!fn(at++, c, report_.cases[i])) return;
  }
}

void memory_cases::visit_keys(const key_fn& fn) const {
  std::size_t at = 0;
  for (auto i : order()) {
    const auto& c = p_.cases[i];
    if (!fn(at++, c.key)) return;
  }
}

saved_cases::saved_cases(const store::run_reader& run, std::vector<bool> chosen)
    : run_(run), chosen_(std::move(chosen)) {
  if (chosen_.empty())
    size_ = run_.size();
  else
    size_ = static_cast<std::size_t>(std::count(chosen_.begin(), chosen_.end(), true));
}

std::size_t saved_cases::size() const {
  return size_;
}

void saved_cases::visit(const case_fn& fn) const {
  std::size_t n = 0;
  auto late = run_.visit_cases(
      [&](std::size_t, const plan::planned_case& c, const schedule::case_record& r) {
        return fn(n++, c, r);
      },
      [&](std::size_t i, std::string_view) { return chosen_.empty() || chosen_[i]; });
  keep_problems(std::move(late));
}

void saved_cases::visit_lines(const line_fn& fn) const {
  std::size_t n = 0;
  keep_problems(run_.visit_lines(
      [&](std::size_t, std::string_view, std::string_view line, schedule::case_state) {
        return fn(n++, line);
      },
      [&](std::size_t i, std::string_view) { return chosen_.empty() || chosen_[i]; }));
}

void saved_cases::keep_problems(std::vector<std::string> late) const {
  for (auto& u : late)  // each visit may meet the same one
    if (std::find(problems_.begin(), problems_.end(), u) == problems_.end())
      problems_.push_back(std::move(u));
}

void saved_cases::visit_keys(const key_fn& fn) const {
  for (std::size_t i = 0, n = 0; i < run_.size(); ++i)
    if (chosen_.empty() || chosen_[i])
      if (!fn(n++, run_.key(i))) return;
}

store::write_error finish_run(store::run_store& run, const plan::plan& whole,
                              schedule::run_report& report, const aggregate::summary& s) {
  report.seconds = run.seconds();
  return run.finish(run_files(whole, report, s), aggregate::summary_json(s, report));
}

}  // namespace mira::report
