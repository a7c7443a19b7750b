// The `mira` command line: a thin client of the library. `list` prints the catalogue, `run`
// runs every available case with a bounded number in flight and an optional per-case deadline.
#include "cli.hpp"

#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/protocol/codec.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace mira::cli {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr std::string_view version = "0.1.0";

constexpr int exit_ok = 0;
constexpr int exit_failed = 1;
constexpr int exit_usage = 2;
constexpr int exit_host_error = 3;

const char* const main_help = R"(mira - run Mira Eval Protocol studies

Usage:
  mira list [--json] -- STUDY_CMD [ARGS...]
  mira run [-j N] [--timeout SECONDS] [--format table|jsonl] -- STUDY_CMD [ARGS...]
  mira --version

Everything after `--` is the study's command line, passed as is (no shell).
Run `mira COMMAND --help` for a command's options.
)";

const char* const list_help = R"(mira list - print the study's catalogue (every sample page)

Usage: mira list [--json] -- STUDY_CMD [ARGS...]

  --json   print the catalogue as one JSON object

Example:
  mira list -- ./build/examples/example_study
)";

const char* const run_help = R"(mira run - run every available case once per planned trial

Usage: mira run [-j N] [--timeout SECONDS] [--format table|jsonl] -- STUDY_CMD [ARGS...]

  -j, --max-concurrent N   cases in flight at once (default 8)
  --timeout SECONDS        per-case deadline, fractional allowed (e.g. 0.5); a case that
                           misses it is cancelled (the study gets `cancel`) and reported
  --format table|jsonl     table (default): a readable summary; jsonl: one line per case,
                           the study's RunResult plus "key" and "status"

Exit codes: 0 every scored case passed, 1 some case failed, 2 usage error,
            3 host or study error (cannot spawn, incompatible protocol, study died).

Example:
  mira run -j 16 --timeout 30 -- ./build/examples/example_study
)";

struct usage_error {
  std::string message;
};

// Makes study-provided text safe for a terminal: control characters are shown escaped.
std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

struct common_args {
  std::vector<std::string> study;
  bool help = false;
};

// Splits "OPTIONS -- STUDY..." and hands each option to `on_option`, which returns how many
// arguments it consumed (0 = unknown).
template <class F>
common_args parse(const std::vector<std::string>& args, F&& on_option) {
  common_args out;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--") {
      out.study.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      return out;
    }
    std::optional<std::string> value;
    if (i + 1 < args.size()) value = args[i + 1];
    std::size_t used = on_option(a, value);
    if (used == 0) throw usage_error{"unknown option '" + printable(a) + "'"};
    i += used - 1;
  }
  if (out.study.empty()) throw usage_error{"missing study command: put it after `--`"};
  return out;
}

const std::string& need_value(std::string_view opt, const std::optional<std::string>& v) {
  if (!v || v->rfind("--", 0) == 0) throw usage_error{std::string(opt) + " needs a value"};
  return *v;
}

host_options cli_host_options() {
  host_options o;
  o.host_name = "mira-cpp";
  o.on_notification = [](const notification& n) {
    if (n.method != "log") return;
    auto* m = n.params.if_contains("message");
    if (m && m->is_string())
      std::fprintf(stderr, "  study: %s\n", printable(m->get_string()).c_str());
  };
  return o;
}

// Starts the study and initializes it; prints what went wrong otherwise.
asio::awaitable<std::optional<host_handle>> open_study(const std::vector<std::string>& argv) {
  auto ex = co_await asio::this_coro::executor;
  study_command cmd;
  cmd.argv = argv;
  auto host = host_handle::spawn(ex, cmd, cli_host_options());
  if (!host) {
    std::fprintf(stderr, "mira: %s\n", host.error().message().c_str());
    co_return std::nullopt;
  }
  auto init = co_await host->initialize();
  if (!init) {
    std::fprintf(stderr, "mira: initialize failed: %s\n", init.error().message().c_str());
    for (auto& l : init.error().diag.stderr_tail)
      std::fprintf(stderr, "  | %s\n", printable(l).c_str());
    co_return std::nullopt;
  }
  std::fprintf(stderr, "study %s%s%s · protocol %s · %lld evals\n", printable(init->study).c_str(),
               init->study_version.empty() ? "" : " ", printable(init->study_version).c_str(),
               printable(init->protocol_version).c_str(), static_cast<long long>(init->evals));
  co_return std::move(*host);
}

void print_list(const protocol::list_result& list) {
  for (auto& e : list.evals) {
    std::printf("%s%s%s", printable(e.name).c_str(), e.description.empty() ? "" : " — ",
                printable(e.description).c_str());
    std::printf("  (%zu samples", e.samples.size());
    if (e.trials > 1) std::printf(", trials=%lld", static_cast<long long>(e.trials));
    if (e.seed) std::printf(", seed=%lld", static_cast<long long>(*e.seed));
    if (e.max_turns) std::printf(", max_turns=%lld", static_cast<long long>(*e.max_turns));
    std::printf(")\n");
    std::string samples;
    for (std::size_t i = 0; i < e.samples.size() && i < 10; ++i) {
      if (i) samples += ", ";
      samples += printable(e.samples[i].id);
      if (!e.samples[i].tags.empty()) {
        samples += " [";
        for (std::size_t t = 0; t < e.samples[i].tags.size(); ++t)
          samples += (t ? "," : "") + printable(e.samples[i].tags[t]);
        samples += "]";
      }
    }
    if (e.samples.size() > 10) samples += ", … " + std::to_string(e.samples.size() - 10) + " more";
    std::printf("  samples: %s\n", samples.c_str());
    std::string scorers;
    for (auto& s : e.scorers) scorers += (scorers.empty() ? "" : ", ") + printable(s);
    std::printf("  scorers: %s\n", scorers.c_str());
    std::string targets;
    for (auto& t : e.targets) {
      targets += (targets.empty() ? "" : ", ") + printable(t.label);
      if (!t.available) targets += " (unavailable)";
    }
    std::printf("  targets: %s\n", targets.c_str());
    if (!e.axes.empty()) {
      std::string axes;
      for (auto& a : e.axes) {
        axes += (axes.empty() ? "" : ", ") + printable(a.name) + "=[";
        for (std::size_t v = 0; v < a.values.size(); ++v)
          axes += (v ? "," : "") + printable(a.values[v]);
        axes += "]";
      }
      std::printf("  axes:    %s\n", axes.c_str());
    }
  }
}

int cmd_list(const std::vector<std::string>& args) {
  bool as_json = false;
  auto common = parse(args, [&](const std::string& a, const std::optional<std::string>&) {
    if (a == "--json") return as_json = true, std::size_t{1};
    return std::size_t{0};
  });
  if (common.help) return std::fputs(list_help, stdout), exit_ok;

  asio::io_context ctx;
  int rc = exit_host_error;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto host = co_await open_study(common.study);
        if (!host) co_return;
        auto list = co_await host->list_all();
        if (!list) {
          std::fprintf(stderr, "mira: list failed: %s\n", list.error().message().c_str());
          co_return;
        }
        if (as_json)
          std::cout << json::serialize(protocol::encode(*list)) << '\n';
        else
          print_list(*list);
        co_await host->shutdown();
        rc = exit_ok;
      },
      asio::detached);
  ctx.run();
  return rc;
}

enum class status { passed, failed, na, skipped, error, timeout };

std::string_view status_name(status s) {
  switch (s) {
    case status::passed:
      return "passed";
    case status::failed:
      return "failed";
    case status::na:
      return "na";
    case status::skipped:
      return "skipped";
    case status::error:
      return "error";
    case status::timeout:
      return "timeout";
  }
  return "?";
}

std::string_view badge(status s) {
  switch (s) {
    case status::passed:
      return "PASS";
    case status::failed:
      return "FAIL";
    case status::na:
      return "N/A ";
    case status::skipped:
      return "SKIP";
    case status::error:
      return "ERR ";
    case status::timeout:
      return "TIME";
  }
  return "?   ";
}

struct case_outcome {
  status st = status::error;
  json::object record;  // RunResult as received (or synthesised) plus key and status
  std::string note;     // why, for the table
  double seconds = 0;
  bool study_died = false;
};

json::object synthesised(const plan::planned_case& c, std::string_view error, bool infra) {
  json::object o = protocol::encode(c.params);
  o["passed"] = false;
  o["aggregate"] = 0.0;
  o["scores"] = json::array{};
  json::object transcript{
      {"final_response", ""},
      {"iterations", 0},
      {"tool_calls_count", 0},
      {"usage", json::object{{"input_tokens", 0}, {"output_tokens", 0}, {"cost_usd", 0.0}}}};
  if (!error.empty()) transcript["error"] = error;
  if (infra) transcript["error_kind"] = "infra";
  o["transcript"] = std::move(transcript);
  o["skipped"] = error.empty();
  return o;
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

asio::awaitable<case_outcome> run_case(host_handle host, plan::planned_case c,
                                       std::optional<double> timeout) {
  case_outcome out;
  auto t0 = std::chrono::steady_clock::now();
  tl::expected<protocol::run_result, error> r;
  bool timed_out = false;
  if (timeout) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(*timeout)));
    auto raced =
        co_await (host.run(c.params) || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (raced.index() == 0)
      r = std::move(std::get<0>(raced));
    else
      timed_out = true;
  } else {
    r = co_await host.run(c.params);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (timed_out) {
    out.st = status::timeout;
    out.note = "timed out after " + seconds_text(*timeout) + " s";
    out.record = synthesised(c, out.note, false);
  } else if (!r) {
    out.st = status::error;
    out.note = r.error().message();
    out.study_died = r.error().code == errc::study_exited;
    out.record = synthesised(c, out.note, is_retryable(r.error().code) || out.study_died);
  } else {
    out.record = r->raw();
    if (r->skipped)
      out.st = status::skipped, out.note = "skipped by the study";
    else if (r->is_na())
      out.st = status::na, out.note = r->transcript.error.value_or("not evaluated");
    else if (r->passed)
      out.st = status::passed;
    else {
      out.st = status::failed;
      for (auto& s : r->scores)
        if (!s.na && !s.pass) {
          out.note = s.scorer + ": " + s.reason;
          break;
        }
      if (r->transcript.error) out.note = *r->transcript.error;
    }
  }
  co_return out;
}

int cmd_run(const std::vector<std::string>& args) {
  std::size_t max_concurrent = 8;
  std::optional<double> timeout;
  std::string format = "table";
  auto common = parse(args, [&](const std::string& a, const std::optional<std::string>& v) {
    if (a == "-j" || a == "--max-concurrent") {
      const auto& s = need_value(a, v);
      char* end = nullptr;
      long n = std::strtol(s.c_str(), &end, 10);
      if (*end != '\0' || n < 1 || n > 100000)
        throw usage_error{a + " needs a whole number from 1 to 100000, got '" + printable(s) + "'"};
      max_concurrent = static_cast<std::size_t>(n);
      return std::size_t{2};
    }
    if (a == "--timeout") {
      const auto& s = need_value(a, v);
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (*end != '\0' || !std::isfinite(d) || d <= 0)
        throw usage_error{"--timeout needs a positive number of seconds, got '" + printable(s) +
                          "'"};
      timeout = d;
      return std::size_t{2};
    }
    if (a == "--format") {
      format = need_value(a, v);
      if (format != "table" && format != "jsonl")
        throw usage_error{"--format must be table or jsonl, got '" + printable(format) + "'"};
      return std::size_t{2};
    }
    return std::size_t{0};
  });
  if (common.help) return std::fputs(run_help, stdout), exit_ok;

  asio::io_context ctx;
  int rc = exit_host_error;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto started = std::chrono::steady_clock::now();
        auto host = co_await open_study(common.study);
        if (!host) co_return;
        auto list = co_await host->list_all();
        if (!list) {
          std::fprintf(stderr, "mira: list failed: %s\n", list.error().message().c_str());
          co_return;
        }
        auto planned = plan::make_plan(*list);
        if (!planned) {
          std::fprintf(stderr, "mira: %s\n", planned.error().message.c_str());
          co_return;
        }
        auto& cases = planned->cases;
        std::vector<case_outcome> outcomes(cases.size());
        std::vector<std::size_t> to_run;
        for (std::size_t i = 0; i < cases.size(); ++i) {
          if (cases[i].available) {
            to_run.push_back(i);
          } else {
            outcomes[i].st = status::skipped;
            outcomes[i].note = "target unavailable";
            outcomes[i].record = synthesised(cases[i], {}, false);
          }
        }
        auto emit = [&](std::size_t i) {
          outcomes[i].record["key"] = cases[i].key;
          outcomes[i].record["status"] = status_name(outcomes[i].st);
          if (format == "jsonl")
            std::cout << json::serialize(outcomes[i].record) << '\n' << std::flush;
        };
        for (std::size_t i = 0; i < cases.size(); ++i)
          if (!cases[i].available) emit(i);

        // N workers pull from one queue: at most N cases in flight.
        std::size_t next = 0;
        bool study_died = false;
        auto worker = [&]() -> asio::awaitable<void> {
          while (next < to_run.size() && !study_died) {
            auto i = to_run[next++];
            outcomes[i] = co_await run_case(*host, cases[i], timeout);
            if (outcomes[i].study_died) study_died = true;
            emit(i);
          }
        };
        auto ex = co_await asio::this_coro::executor;
        std::size_t workers = std::min(max_concurrent, to_run.size());
        std::size_t done_workers = 0;
        asio::steady_timer all_done(ex, std::chrono::steady_clock::time_point::max());
        for (std::size_t w = 0; w < workers; ++w)
          asio::co_spawn(ex, worker(), [&](std::exception_ptr) {
            if (++done_workers == workers) all_done.cancel();
          });
        if (workers > 0) co_await all_done.async_wait(asio::as_tuple(asio::use_awaitable));

        std::size_t counts[6] = {};
        for (auto& o : outcomes) ++counts[static_cast<int>(o.st)];
        if (study_died) {
          // Cases that never ran because the study died are errors too.
          for (std::size_t i = 0; i < cases.size(); ++i)
            if (cases[i].available && outcomes[i].record.empty()) {
              outcomes[i].note = "not run: the study died";
              outcomes[i].record = synthesised(cases[i], outcomes[i].note, true);
              emit(i);
            }
        }
        double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (format == "table") {
          for (std::size_t i = 0; i < cases.size(); ++i) {
            auto& o = outcomes[i];
            std::printf("%s  %s", std::string(badge(o.st)).c_str(),
                        printable(cases[i].key).c_str());
            if (o.st == status::passed || o.st == status::failed) {
              auto* agg = o.record.if_contains("aggregate");
              if (agg && agg->is_number()) std::printf("  %.2f", agg->to_number<double>());
            }
            if (!o.note.empty()) std::printf("  (%s)", printable(o.note).c_str());
            std::printf("\n");
          }
          std::printf(
              "\n%zu passed, %zu failed, %zu n/a, %zu skipped, %zu errors, %zu timed out "
              "(%zu cases) in %.2f s\n",
              counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], cases.size(),
              elapsed);
        }
        co_await host->shutdown();
        if (study_died)
          rc = exit_host_error;
        else if (counts[1] + counts[4] + counts[5] > 0)
          rc = exit_failed;
        else
          rc = exit_ok;
      },
      asio::detached);
  ctx.run();
  return rc;
}

}  // namespace

int main(const std::vector<std::string>& args) {
  try {
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
      std::fputs(main_help, args.empty() ? stderr : stdout);
      return args.empty() ? exit_usage : exit_ok;
    }
    if (args[0] == "--version") {
      std::printf("mira %s (protocol %s)\n", std::string(version).c_str(),
                  std::string(protocol::protocol_version).c_str());
      return exit_ok;
    }
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "list") return cmd_list(rest);
    if (args[0] == "run") return cmd_run(rest);
    throw usage_error{"unknown command '" + printable(args[0]) + "' (commands: list, run)"};
  } catch (const usage_error& e) {
    std::fprintf(stderr, "mira: %s\nRun `mira --help` for usage.\n", e.message.c_str());
    return exit_usage;
  }
}

}  // namespace mira::cli
