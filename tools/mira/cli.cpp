// The `mira` command line: a thin client of the library. `list` prints the catalogue, `plan`
// shows what a selection would run, `report` renders a saved run; `run` is in run_command.cpp.
#include "cli.hpp"

#include "commands.hpp"
#include "config_step.hpp"
#include "console.hpp"
#include "help.hpp"
#include "shard_step.hpp"

#include <mira/aggregate/summary.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/report/render.hpp>
#include <mira/session/session.hpp>
#include <mira/store/run_reader.hpp>
#include <mira/store/run_store.hpp>
#include <mira/store/summary_feed.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

namespace mira::cli {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// Listing metadata as ` {k=v, ...}`: strings bare, other values as JSON; "" when empty.
std::string metadata_text(const json::object& m) {
  if (m.empty()) return {};
  std::string out = " {";
  for (auto& [k, v] : m) {
    if (out.size() > 2) out += ", ";
    out += printable(k) + "=" +
           printable(v.is_string() ? std::string(v.get_string()) : protocol::to_json_text(v));
  }
  return out + "}";
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
      samples += printable(e.samples.id(i));
      if (auto& tags = e.samples.tags(i); !tags.empty()) {
        samples += " [";
        for (std::size_t t = 0; t < tags.size(); ++t)
          samples += (t ? "," : "") + printable(tags[t]);
        samples += "]";
      }
      samples += metadata_text(e.samples.metadata(i));
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
      if (!t.provider.empty()) targets += " provider=" + printable(t.provider);
      targets += metadata_text(t.metadata);
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
    if (!e.metadata.empty()) std::printf("  meta:   %s\n", metadata_text(e.metadata).c_str());
  }
}

void print_plan(const plan::plan& p, bool as_json, bool sharded) {
  if (as_json) {
    for (const auto& c : p.cases) {
      auto o = protocol::encode(c.params);
      o["key"] = c.key;
      if (!c.provider.empty()) o["provider"] = c.provider.str();
      if (!c.available) o["available"] = false;
      std::cout << protocol::to_json_text(o) << '\n';
    }
    return;
  }
  std::size_t total = 0;
  for (auto& e : p.evals) {
    // The grid's product, then what the filter left of it, so the figures always add up.
    const auto grid = e.samples * e.targets * e.axis_combinations * e.trials;
    std::printf(
        "%s: %zu sample(s) x %zu target(s) x %zu axis combination(s) x %zu trial(s) = %zu "
        "case(s)",
        printable(e.eval).c_str(), e.samples, e.targets, e.axis_combinations, e.trials, grid);
    if (sharded || e.cases != grid)
      std::printf(", %zu %s", e.cases, sharded ? "in the shard" : "after the filter");
    std::printf("\n");
    total += e.cases;
  }
  std::size_t unavailable = 0;
  for (const auto& c : p.cases) unavailable += !c.available;
  std::printf(sharded ? "total in the shard: %zu case(s)" : "total: %zu case(s)", total);
  if (unavailable) std::printf(", %zu on unavailable targets (reported as skipped)", unavailable);
  std::printf("\n");
}

int cmd_list(const std::vector<std::string>& args) {
  auto a = parse_args(command::list, args);
  if (a.help) return std::fputs(command_help(command::list).c_str(), stdout), exit_ok;
  prepare(command::list, a);
  return run_io([&](int& rc) -> asio::awaitable<void> {
    console out;
    auto study = co_await start_listed_study(a, out);
    if (!study) co_return;
    if (a.json)
      std::cout << protocol::to_json_text(protocol::encode(study->listing)) << '\n';
    else
      print_list(study->listing);
    co_await study->connection.shutdown();
    rc = exit_ok;
  });
}

int cmd_plan(const std::vector<std::string>& args) {
  auto a = parse_args(command::plan, args);
  if (a.help) return std::fputs(command_help(command::plan).c_str(), stdout), exit_ok;
  prepare(command::plan, a);
  return run_io([&](int& rc) -> asio::awaitable<void> {
    console out;
    auto pl = co_await start_and_plan(a, out, rc);
    if (!pl) co_return;
    co_await pl->study.connection.shutdown();
    std::optional<store::shard_info> shard;
    if (!select_shard(a, pl->plan, shard, rc)) co_return;
    print_plan(pl->plan, a.json, shard.has_value());
    rc = exit_ok;
  });
}

}  // namespace

namespace {

// The run's own report.json and report.html are rendered again (over every saved case, as the
// Rust host does) when one is missing or older than the records: the run's last session did
// not finish (killed, or cut short before it wrote them). Only under the run's lock, and only
// when the run is still what was read: a run in use, or resumed meanwhile, writes its own. A
// finished run's files (a downloaded artefact's too) are left as they are. False when a file
// could not be written (each is replaced whole or not at all).
bool refresh_run_reports(const run_args& a, const store::run_reader& read,
                         std::shared_ptr<const report::case_source> cases,
                         const schedule::run_report& report, const aggregate::summary& s) {
  const auto& meta = read.meta();
  if (meta.made_by_rust_host) {
    // Its report.json has the Rust host's shape, which its own tools read.
    std::fprintf(stderr,
                 "mira: note: run %s was made by the Rust mira CLI: its report files are left as "
                 "they are\n",
                 printable(a.run_id).c_str());
    return true;
  }
  std::error_code ec;
  const bool missing = !std::filesystem::exists(read.path() / "report.json", ec) ||
                       !std::filesystem::exists(read.path() / "report.html", ec);
  const bool last_finished = !meta.sessions.empty() && !meta.sessions.back().finished.empty();
  if (!missing && last_finished) return true;
  auto run = store::run_store::open(a.results_dir, a.run_id);
  if (!run && run.error().code == store::errc::corrupt) {
    // A link where a file of the run should be: nothing is written through it.
    std::fprintf(stderr, "mira: error: %s\n", printable(run.error().message()).c_str());
    return false;
  }
  if (!run) {
    std::fprintf(stderr, "mira: note: report.json and report.html left as they are: %s\n",
                 printable(run.error().message()).c_str());
    return true;
  }
  auto session_of = [](const store::run_meta& m) {
    return m.sessions.empty() ? std::pair<std::string, std::string>{}
                              : std::pair{m.sessions.back().started, m.sessions.back().finished};
  };
  if (run->meta().sessions.size() != meta.sessions.size() ||
      session_of(run->meta()) != session_of(meta)) {
    std::fprintf(stderr,
                 "mira: note: run %s was resumed while it was read: its report files are left to "
                 "that session\n",
                 printable(a.run_id).c_str());
    return true;
  }
  if (auto failed = run->write_files(report::run_files(cases, report, s))) {
    std::fprintf(stderr, "mira: error: %s\n", printable(failed.message()).c_str());
    return false;
  }
  std::fprintf(stderr, "rewrote report.json and report.html in %s\n",
               printable(run->path().string()).c_str());
  return true;
}

}  // namespace

namespace {

// What the table of a report over the saved summary lists: as many as `mira run`'s own table.
const std::size_t listed_cases = session_options{}.kept_records;

// The summary of the run's records, read a case at a time: the ones whose key has FILTER's text
// (marked in `chosen`); the planned cases without one count as cancelled. The records gone since
// the run was opened are named and added to `unreadable`.
aggregate::summary summary_of_records(const run_args& a, const store::run_reader& run,
                                      const store::run_completeness& c, std::vector<bool>& chosen,
                                      std::size_t& unreadable) {
  const auto& filter = a.selection.filter;
  chosen.assign(run.size(), false);
  store::summary_feed feed(a.group_by);
  auto late = run.visit_cases(
      [&](std::size_t i, const plan::planned_case& pc, const schedule::case_record& r) {
        if (!filter.empty() && pc.logical_key().find(filter) == std::string_view::npos) return true;
        chosen[i] = true;
        feed.add(pc, r);
        return true;
      });
  if (!filter.empty() && feed.size() == 0)
    std::fprintf(stderr, "mira: no saved case of run %s has a key containing \"%s\"\n",
                 printable(a.run_id).c_str(), printable(filter).c_str());
  for (auto& u : late)
    std::fprintf(stderr, "mira: warning: cannot read %s\n", printable(u).c_str());
  unreadable += late.size();
  auto s = feed.finish();
  if (filter.empty()) store::count_unfinished(s, c.unfinished());
  if (run.meta().summary && !run.meta().made_by_rust_host)
    aggregate::order_as_saved(s, *run.meta().summary);
  return s;
}

}  // namespace

int cmd_report(const std::vector<std::string>& args) {
  auto a = parse_args(command::report, args);
  if (a.help) return std::fputs(command_help(command::report).c_str(), stdout), exit_ok;
  prepare(command::report, a);
  if (refuse_outs(a)) return exit_usage;
  // The run is read a case at a time: once for the summary (and the cases the filter keeps),
  // unless the run saved it, then once per thing written (the table, the --format report, the
  // run's report files).
  int rc = exit_ok;
  auto run = open_saved_run(a, rc);
  if (!run) return rc;
  // A script must never take a report that leaves cases out for the whole run.
  auto unreadable = run->unreadable().size();
  const auto total = run->size() + unreadable;
  if (run->size() == 0 && unreadable > 0) {
    std::fprintf(stderr,
                 "mira: none of the %zu saved result(s) of run %s can be read (see above)\n",
                 unreadable, printable(a.run_id).c_str());
    return exit_host_error;
  }
  // How far the run got, as the run itself said it: the planned cases it never saved count as
  // cancelled, and every artefact says why it stopped.
  const auto completeness = store::completeness_of(*run);
  const auto header = store::report_header(*run, completeness);
  // The cases the summary counts (the filter's, the readable ones): the ones rendered below.
  std::vector<bool> chosen;
  // The run's own summary unless a filter asks for fewer cases.
  auto saved = a.selection.filter.empty() ? store::saved_summary(*run, a.group_by) : std::nullopt;
  auto s =
      saved ? std::move(*saved) : summary_of_records(a, *run, completeness, chosen, unreadable);
  auto cases = std::make_shared<const report::saved_cases>(*run, std::move(chosen));
  // With the saved summary the table lists the first cases, as the run's own did.
  std::optional<report::saved_cases> first;
  if (saved && run->size() > listed_cases) {
    std::vector<bool> head(run->size(), false);
    std::fill_n(head.begin(), listed_cases, true);
    first.emplace(*run, std::move(head));
  }
  if (!emit_report(a, *cases, header, s, false, first ? &*first : nullptr)) return exit_host_error;
  // Rendering elsewhere (--out) never writes into the run folder.
  const bool rendered_elsewhere = !a.out.empty() || !a.outs.empty();
  if (a.selection.filter.empty() && unreadable == 0 && !rendered_elsewhere &&
      !refresh_run_reports(a, *run, cases, header, s))
    return exit_host_error;
  unreadable += cases->problems().size() + (first ? first->problems().size() : 0);
  if (unreadable > 0) {
    std::fprintf(stderr,
                 "mira: the report is incomplete: %zu of %zu saved result(s) of run %s cannot be "
                 "read (see above)\n",
                 unreadable, total, printable(a.run_id).c_str());
    return exit_host_error;
  }
  // Cases missing though no session stopped (lost records, shards not merged): the report is
  // not the whole run, whatever is asked. A stop is judged as the run was (--check).
  const bool lost =
      completeness.stopped == schedule::stop_reason::none && completeness.unfinished() > 0;
  if (lost)
    std::fprintf(stderr,
                 "mira: the report is incomplete: run %s: %s (`mira run --resume %s` runs them)\n",
                 printable(a.run_id).c_str(), printable(completeness.stop_message).c_str(),
                 printable(a.run_id).c_str());
  if (!a.check) return lost ? exit_host_error : exit_ok;
  return exit_code_for(header, s, lost, a.min_scored);
}

int main(const std::vector<std::string>& args) {
  try {
    if (args.size() >= 2 && args[0] == "help") {
      if (args[1] == "--full" && args.size() == 2)
        return std::fputs(full_help().c_str(), stdout), exit_ok;
      if (auto cmd = command_named(args[1]); cmd && args.size() == 2)
        return std::fputs(command_help(*cmd).c_str(), stdout), exit_ok;
      throw usage_error{"mira help takes --full or a command name, got '" + printable(args[1]) +
                        "'"};
    }
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
    if (args[0] == "plan") return cmd_plan(rest);
    if (args[0] == "run") return cmd_run(rest);
    if (args[0] == "score") return cmd_score(rest);
    if (args[0] == "report") return cmd_report(rest);
    if (args[0] == "export") return cmd_export(rest);
    if (args[0] == "store") return cmd_store(rest);
    if (args[0] == "merge") return cmd_merge(rest);
    if (args[0] == "serve") return cmd_serve(rest);
    if (args[0] == "view") return cmd_view(rest);
    if (args[0] == "doctor") return cmd_doctor(rest);
    if (args[0] == "compare") return cmd_compare(rest);
    throw usage_error{"unknown command '" + printable(args[0]) +
                      "' (commands: list, plan, run, score, report, export, store, merge, doctor, "
                      "compare, serve, view, help)"};
  } catch (const usage_error& e) {
    std::fprintf(stderr, "mira: %s\nRun `mira --help` for usage.\n", e.message.c_str());
    return exit_usage;
  }
}

}  // namespace mira::cli
