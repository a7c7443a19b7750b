// Example 11: a study and a host in one process, as a test of a study is written. The study is
// served with the study SDK on one end of a socket pair, this library's host speaks to it on
// the other, both on one io_context: no child process, no pipes to set up, and a failure shows
// as a value the test can check.
//
// Usage: example_11_study_in_process
// Exits 0 when all four cases come back as expected: two passed, one failed, one N/A.
#include <mira/host.hpp>
#include <mira/study.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <cstdio>

namespace asio = boost::asio;
namespace study = mira::study;
using mira::protocol::transcript;

// The study under test: it doubles a number, except that it cannot count past 9 and that the
// "down" sample finds its provider down.
study::registry doubling_study() {
  study::registry s("doubler", "1.0");
  s.add("double")
      .samples({{"2", {}, boost::json::value("4")},
                {"4", {}, boost::json::value("8")},
                {"7", {}, boost::json::value("14")},
                {"down"}})
      .add_target("sim", "sim")
      .score_with(study::scorers::matches_expected())
      .subject([](study::run_context& c) -> asio::awaitable<transcript> {
        transcript t;
        if (c.id().sample == "down") {
          t.error = "provider returned 503";
          t.error_kind = mira::protocol::error_kind::infra;
          co_return t;
        }
        auto n = std::stoi(c.id().sample) * 2;
        t.final_response = std::to_string(n > 9 ? 9 : n);
        co_return t;
      });
  return s;
}

asio::awaitable<int> check(asio::local::stream_protocol::socket to_study) {
  auto host = mira::host_handle::connect(std::move(to_study));
  if (auto init = co_await host.initialize(); !init) {
    std::fprintf(stderr, "%s\n", init.error().message().c_str());
    co_return 1;
  }
  int wrong = 0;
  struct expect {
    const char* sample;
    const char* outcome;
  };
  for (auto [sample, outcome] : {expect{"2", "passed"}, expect{"4", "passed"},
                                 expect{"7", "failed"}, expect{"down", "n/a"}}) {
    mira::protocol::run_params p;
    p.eval = "double";
    p.sample = sample;
    p.target = "sim";
    auto r = co_await host.run(p);
    const char* got = !r ? "error" : r->is_na() ? "n/a" : r->passed ? "passed" : "failed";
    std::printf("double/%s: %s\n", sample, got);
    wrong += std::string_view(got) != outcome;
  }
  co_await host.shutdown();
  co_return wrong == 0 ? 0 : 1;
}

int main() {
  asio::io_context io;
  asio::local::stream_protocol::socket study_end(io), host_end(io);
  asio::local::connect_pair(study_end, host_end);
  auto s = doubling_study();
  // The study ends when the host closes its end (shutdown() above).
  asio::co_spawn(io, study::serve(s, study::stream_of(study_end)), asio::detached);
  int rc = 1;
  asio::co_spawn(io, check(std::move(host_end)),
                 [&](std::exception_ptr e, int r) { rc = e ? 1 : r; });
  io.run();
  return rc;
}
