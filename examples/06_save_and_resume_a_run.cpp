// Example 6: a service that runs a plan and keeps it as a saved run, with the library alone:
// plan the study's listing, create a run store (or open the saved run and resume it), save
// each finished case through the store's writer, and end the session with report.json,
// report.html and meta.json over the whole run. `mira report RUN_ID` reads the result.
//
// Usage: example_06_save_and_resume_a_run RESULTS_DIR [RUN_ID] -- STUDY_CMD [ARGS...]
//        Without RUN_ID a new run is made; with it, the saved run is resumed (only the cases it
//        lacks are run). Prints the run id.
#include <mira/aggregate/summary.hpp>
#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/report/render.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/store/files.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

namespace asio = boost::asio;
namespace store = mira::store;

asio::awaitable<int> save_or_resume(std::string results, std::string run_id,
                                    std::vector<std::string> argv) {
  auto ex = co_await asio::this_coro::executor;
  mira::study_command study;
  study.argv = std::move(argv);
  auto host = mira::host_handle::spawn(ex, study);
  if (!host) co_return std::fprintf(stderr, "%s\n", host.error().message().c_str()), 3;
  auto init = co_await host->initialize();
  if (!init) co_return std::fprintf(stderr, "%s\n", init.error().message().c_str()), 3;
  auto list = co_await host->list_all();
  if (!list) co_return std::fprintf(stderr, "%s\n", list.error().message().c_str()), 3;
  auto p = mira::plan::make_plan(*list);
  if (!p) co_return std::fprintf(stderr, "%s\n", p.error().message.c_str()), 2;

  // A new run, or the saved one (locked for this session) and what it still lacks.
  auto opened = run_id.empty()
                    ? store::run_store::create(results,
                                               store::new_run_id(std::chrono::system_clock::now(),
                                                                 std::random_device{}() & 0xffff),
                                               store::layout::per_case)
                    : store::run_store::open(results, run_id);
  if (!opened) co_return std::fprintf(stderr, "%s\n", opened.error().message().c_str()), 3;
  auto& run = *opened;
  store::resume_plan resumed;
  if (run_id.empty()) {
    for (std::size_t i = 0; i < p->cases.size(); ++i) resumed.todo.push_back(i);
    resumed.records.resize(p->cases.size());
  } else {
    auto decided = store::plan_resume(run.load(), *p, *init, {}, std::nullopt, {});
    if (!decided) co_return std::fprintf(stderr, "%s\n", decided.error().message().c_str()), 2;
    resumed = std::move(*decided);
  }
  run.meta().study = init->study;
  run.meta().study_version = init->study_version;
  run.meta().initialize = init->raw;
  store::run_session session;  // the start time, host and pid are filled in
  session.planned = p->cases.size();
  session.reused = resumed.reused;
  run.begin_session(session);

  mira::plan::plan todo;
  for (auto i : resumed.todo) todo.cases.push_back(p->cases[i]);
  auto writer = run.writer();
  if (!writer) co_return std::fprintf(stderr, "%s\n", writer.error().message().c_str()), 3;
  mira::schedule::run_hooks hooks;
  hooks.on_result = [&](std::size_t j, const mira::schedule::case_record& r) {
    if (r.state == mira::schedule::case_state::cancelled) return;  // not finished: resumable
    auto& c = todo.cases[j];
    (*writer)->submit(c.key, store::case_line(c, r), [](boost::system::error_code ec) {
      if (ec) std::fprintf(stderr, "cannot save: %s\n", ec.message().c_str());
    });
  };
  auto part = co_await mira::schedule::run_plan(*host, todo, {}, hooks);
  (*writer)->drain();
  co_await host->shutdown();

  // The session's report over the plan: reused cases and the ones run now, in plan order.
  mira::schedule::run_report report;
  report.cases = std::move(resumed.records);
  for (std::size_t j = 0; j < part.cases.size(); ++j)
    report.cases[resumed.todo[j]] = std::move(part.cases[j]);
  run.session().seconds = part.seconds;
  run.session().ran = part.cases.size();
  auto whole = store::whole_run(*p, report, resumed);
  auto& all_plan = whole ? whole->first : *p;
  auto& all = whole ? whole->second : report;
  auto s = mira::aggregate::summarize(all_plan, all.cases, &*list);
  if (auto ec = mira::report::finish_run(run, all_plan, all, s))
    std::fprintf(stderr, "cannot finish the run: %s\n", ec.message().c_str());
  std::printf("%s\n", run.id().c_str());
  std::fprintf(stderr, "%zu case(s) reused, %zu run; %zu passed overall\n", resumed.reused,
               part.cases.size(), s.count(mira::schedule::case_state::passed));
  co_return 0;
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto dash = std::find(args.begin(), args.end(), "--");
  if (args.empty() || dash == args.end() || dash + 1 == args.end() || dash - args.begin() > 2) {
    std::fprintf(stderr, "usage: %s RESULTS_DIR [RUN_ID] -- STUDY_CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  std::string run_id = dash - args.begin() == 2 ? args[1] : "";
  asio::io_context ctx;
  int rc = 3;
  asio::co_spawn(ctx, save_or_resume(args[0], run_id, {dash + 1, args.end()}),
                 [&](std::exception_ptr, int r) { rc = r; });
  ctx.run();
  return rc;
}
