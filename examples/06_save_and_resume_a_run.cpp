// Example 6: a service that runs a study's evals as a saved run, with one library call:
// mira::run_session starts the study, plans every case, saves each finished one and ends with
// report.json, report.html and meta.json. Given a run id, it resumes that run instead: only the
// cases it lacks are run. `mira report RUN_ID` reads the result.
//
// Usage: example_06_save_and_resume_a_run RESULTS_DIR [RUN_ID] -- STUDY_CMD [ARGS...]
//        Prints the run id.
#include <mira/session/session.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <cstdio>

namespace asio = boost::asio;

asio::awaitable<int> save_or_resume(std::string results, std::string run_id,
                                    std::vector<std::string> study) {
  mira::session_options o;
  o.study.command.argv = std::move(study);
  o.save.emplace();
  o.save->results_dir = std::move(results);
  o.save->resume = std::move(run_id);  // empty: a new run
  auto done = co_await mira::run_session(std::move(o));
  if (!done) co_return std::fprintf(stderr, "%s\n", done.error().message().c_str()), 3;
  std::printf("%s\n", done->run_id.c_str());
  std::fprintf(stderr, "%zu case(s) reused, %zu run; %zu passed overall\n", done->reused, done->ran,
               done->summary.count(mira::schedule::case_state::passed));
  co_return done->unfinished ? 3 : 0;
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
