// Example 10: a service that runs two saved sessions at once on one io_context, each under its
// own deadline. The quick one (the greet eval) finishes well within its deadline; the slow one
// (the slow eval, which waits until cancelled) is stopped at its deadline as Ctrl-C stops
// `mira run`: its case is cancelled, the run is saved and can be resumed. Neither waits for the
// other: each session has its own study process and its own run folder.
//
// Usage: example_10_two_sessions_with_deadlines RESULTS_DIR STUDY_CMD [ARGS...]
// Exits 0 when the quick session finished and the slow one stopped at its deadline, resumable.
#include <mira/session/session.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdio>
#include <optional>

namespace asio = boost::asio;
using namespace std::chrono_literals;

// A session of `eval`, saved in `results`; cancelled (as by Ctrl-C) when `deadline` passes.
struct deadlined_session {
  deadlined_session(asio::io_context& ctx, std::string results, std::vector<std::string> study,
                    std::string eval, std::chrono::milliseconds deadline)
      : timer(ctx, deadline) {
    mira::session_options o;
    o.study.command.argv = std::move(study);
    o.selection.evals = {std::move(eval)};
    o.save.emplace();
    o.save->results_dir = std::move(results);
    mira::async_run_session(
        ctx.get_executor(), std::move(o),
        asio::bind_cancellation_slot(cancel.slot(), [this](std::exception_ptr, auto done) {
          outcome = std::move(done);
          timer.cancel();  // ended first: the deadline no longer applies
        }));
    timer.async_wait([this](boost::system::error_code ec) {
      if (!ec) cancel.emit(asio::cancellation_type::terminal);
    });
  }
  asio::steady_timer timer;
  asio::cancellation_signal cancel;
  std::optional<tl::expected<mira::session_outcome, mira::session_error>> outcome;
};

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s RESULTS_DIR STUDY_CMD [ARGS...]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> study(argv + 2, argv + argc);
  asio::io_context ctx;
  deadlined_session quick(ctx, argv[1], study, "greet", 30s);
  deadlined_session slow(ctx, argv[1], study, "slow", 1s);
  ctx.run();
  for (auto* s : {&quick, &slow}) {
    if (!s->outcome || !*s->outcome) {
      std::fprintf(stderr, "a session failed: %s\n",
                   s->outcome ? (*s->outcome).error().message().c_str() : "no outcome");
      return 1;
    }
  }
  auto& q = **quick.outcome;
  auto& w = **slow.outcome;
  std::printf("quick: run %s, %zu case(s), stopped: %s\n", q.run_id.c_str(), q.report.cases.size(),
              std::string(to_string(q.stopped())).c_str());
  std::printf("slow: run %s, %zu case(s), stopped: %s, resumable: %s\n", w.run_id.c_str(),
              w.report.cases.size(), std::string(to_string(w.stopped())).c_str(),
              w.resumable() ? "yes" : "no");
  const bool ok = q.stopped() == mira::schedule::stop_reason::none &&
                  w.stopped() == mira::schedule::stop_reason::interrupted && w.resumable();
  return ok ? 0 : 1;
}
