// serve_load: `mira serve` (the library's server) under load, beside the same run without it.
// One process, side by side: first the run through the library alone, saved as `mira run`
// saves it (spawn, initialize, list, plan, run store, run_plan with the store's writer); then
// the same run started through the API of a server on its own thread while, from a client
// thread, S clients follow its event stream and W workers send R status requests
// (GET /v1/runs/ID, kept-alive connections). Prints the status requests per second and their
// p50/p99 latency, how many landed while the run went, whether every stream saw every event,
// and the run's throughput with and without the server, as a ratio.
//
//   serve_load [-n CASES] [-j CONCURRENCY] [--sse S] [--status R] [--workers W] [-r ROUNDS]
//              ECHO_STUDY
//
// Not a test: nothing here passes or fails on time.
#include <mira/aggregate/summary.hpp>
#include <mira/host.hpp>
#include <mira/plan/plan.hpp>
#include <mira/report/render.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/serve/server.hpp>
#include <mira/store/files.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  std::size_t cases = 10000, concurrency = 8, sse = 100, status = 2000, workers = 8, rounds = 5;
  std::string study;
};

// A results folder for one run, removed with everything saved in it when the run is measured.
struct scratch {
  std::string path;
  scratch() {
    char tmpl[] = "/tmp/mira-serve-load-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// The run through the library alone, as `mira run` saves it: seconds from the session's start
// to the finished run folder (the span the server reports as a run's seconds).
asio::awaitable<double> library_run(options o, std::string results) {
  auto ex = co_await asio::this_coro::executor;
  mira::study_command cmd;
  cmd.argv = {o.study, "--samples", std::to_string(o.cases)};
  auto host = mira::host_handle::spawn(ex, cmd);
  auto init = co_await host->initialize();
  auto list = co_await host->list_all();
  auto p = mira::plan::make_plan(*list);
  auto run = mira::store::run_store::create(results, "library", mira::store::layout::per_case);
  auto t0 = clock_type::now();
  run->begin_session({});
  auto writer = run->writer();
  mira::schedule::run_hooks hooks;
  hooks.on_result = [&](std::size_t j, const mira::schedule::case_record& r) {
    const auto c = p->cases[j];
    (*writer)->submit(c.key, mira::store::case_line(c, r), [](boost::system::error_code) {});
  };
  mira::schedule::run_policy policy;
  policy.concurrency.max_concurrent = o.concurrency;
  auto report = co_await mira::schedule::run_plan(*host, *p, policy, hooks);
  (*writer)->drain();
  co_await host->shutdown();
  auto s = mira::aggregate::summarize(*p, report.cases, &*list);
  mira::report::finish_run(*run, *p, report, s);
  co_return std::chrono::duration<double>(clock_type::now() - t0).count();
  (void)init;
}

struct load_result {
  std::vector<double> latencies_ms;  // status requests
  std::size_t during_run = 0;        // status requests answered before the run's end
  double status_seconds = 0;
  std::size_t streams_complete = 0;  // event streams that saw every event up to the end
  double run_seconds = 0;            // the server's own measure of the run
  std::size_t run_cases = 0;
};

asio::awaitable<std::string> post_run(tcp::endpoint ep, const options& o) {
  tcp::socket s(co_await asio::this_coro::executor);
  co_await s.async_connect(ep, asio::use_awaitable);
  http::request<http::string_body> req{http::verb::post, "/v1/runs", 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::content_type, "application/json");
  req.body() =
      R"({"study":"echo","options":{"concurrency":)" + std::to_string(o.concurrency) + "}}";
  req.prepare_payload();
  co_await http::async_write(s, req, asio::use_awaitable);
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  co_await http::async_read(s, buf, res, asio::use_awaitable);
  co_return std::string(json::parse(res.body()).at("run_id").as_string());
}

// One event stream to its end: whether it saw ids 1..last without a gap, and the end's data.
asio::awaitable<void> follow(tcp::endpoint ep, std::string id, load_result& r,
                             std::atomic<bool>& ended, clock_type::time_point& end_at) {
  tcp::socket s(co_await asio::this_coro::executor);
  co_await s.async_connect(ep, asio::use_awaitable);
  std::string req = "GET /v1/runs/" + id + "/events HTTP/1.1\r\nHost: localhost\r\n\r\n";
  co_await asio::async_write(s, asio::buffer(req), asio::use_awaitable);
  std::string pending;
  std::uint64_t expected = 1;
  bool gap = false;
  char buf[65536];
  for (;;) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    pending.append(buf, n);
    // Frames are read in place and the consumed part erased once per read: erasing per frame
    // would make this client, not the server, the bottleneck.
    std::size_t from = 0, pos;
    while ((pos = pending.find("\n\n", from)) != std::string::npos) {
      std::string_view frame(pending.data() + from, pos - from);
      from = pos + 2;
      auto at = frame.find("id: ");
      if (at == std::string_view::npos) continue;  // the HTTP header, or a keep-alive comment
      auto got = std::strtoull(frame.data() + at + 4, nullptr, 10);
      gap |= got != expected;
      expected = got + 1;
      if (frame.find("event: end") != std::string_view::npos) {
        if (!ended.exchange(true)) {
          end_at = clock_type::now();
          auto data = json::parse(frame.substr(frame.find("data: ") + 6));
          r.run_seconds = data.at("seconds").to_number<double>();
          r.run_cases = static_cast<std::size_t>(data.at("total").to_number<double>());
        }
        if (!gap) ++r.streams_complete;
        co_return;
      }
    }
    pending.erase(0, from);
    if (ec) co_return;
  }
}

asio::awaitable<void> status_worker(tcp::endpoint ep, std::string id, std::size_t count,
                                    load_result& r, std::atomic<bool>& ended) {
  tcp::socket s(co_await asio::this_coro::executor);
  co_await s.async_connect(ep, asio::use_awaitable);
  boost::beast::flat_buffer buf;
  http::request<http::empty_body> req{http::verb::get, "/v1/runs/" + id, 11};
  req.set(http::field::host, "localhost");
  for (std::size_t i = 0; i < count; ++i) {
    auto t0 = clock_type::now();
    co_await http::async_write(s, req, asio::use_awaitable);
    http::response<http::string_body> res;
    co_await http::async_read(s, buf, res, asio::use_awaitable);
    r.latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
    if (!ended) ++r.during_run;
  }
}

load_result served_run(const options& o, const std::string& results) {
  asio::io_context server_ctx{1};
  mira::serve::server_config config;
  config.port = 0;
  config.results_dir = results;
  config.max_connections = o.sse + o.workers + 16;
  config.max_connections_per_client = config.max_connections;  // every client is this process
  config.studies.push_back({"echo", {o.study, "--samples", std::to_string(o.cases)}});
  mira::serve::server srv(server_ctx.get_executor(), config);
  auto ep = srv.start();
  if (!ep) {
    std::fprintf(stderr, "%s\n", ep.error().message().c_str());
    std::exit(3);
  }
  std::thread server_thread([&] { server_ctx.run(); });

  load_result r;
  asio::io_context client_ctx{1};
  std::atomic<bool> ended{false};
  clock_type::time_point end_at, status_t0, status_t1;
  std::size_t workers_left = o.workers;  // here, not in the coroutine that starts them
  asio::co_spawn(
      client_ctx,
      [&]() -> asio::awaitable<void> {
        auto id = co_await post_run(*ep, o);
        auto ex = co_await asio::this_coro::executor;
        for (std::size_t i = 0; i < o.sse; ++i)
          asio::co_spawn(ex, follow(*ep, id, r, ended, end_at), [](std::exception_ptr) {});
        status_t0 = clock_type::now();
        for (std::size_t w = 0; w < o.workers; ++w)
          asio::co_spawn(
              ex,
              status_worker(*ep, id, o.status / o.workers + (w < o.status % o.workers), r, ended),
              [&](std::exception_ptr) {
                if (--workers_left == 0) status_t1 = clock_type::now();
              });
        co_return;
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  client_ctx.run();  // until every stream and worker is done
  r.status_seconds = std::chrono::duration<double>(status_t1 - status_t0).count();
  asio::co_spawn(server_ctx, srv.stop(), [](std::exception_ptr) {});
  server_thread.join();
  return r;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return static_cast<std::size_t>(std::strtoull(argv[++i], nullptr, 10)); };
    if (a == "-n" && i + 1 < argc)
      o.cases = next();
    else if (a == "-j" && i + 1 < argc)
      o.concurrency = next();
    else if (a == "--sse" && i + 1 < argc)
      o.sse = next();
    else if (a == "--status" && i + 1 < argc)
      o.status = next();
    else if (a == "--workers" && i + 1 < argc)
      o.workers = std::max<std::size_t>(1, next());
    else if (a == "-r" && i + 1 < argc)
      o.rounds = std::max<std::size_t>(1, next());
    else
      o.study = a;
  }
  if (o.study.empty()) {
    std::fprintf(stderr,
                 "usage: serve_load [-n N] [-j J] [--sse S] [--status R] [--workers W] [-r ROUNDS] "
                 "ECHO_STUDY\n");
    return 2;
  }
  // Rounds of the three runs, their order rotated each round; each ratio is taken within its
  // round (the machine's load moves between rounds), and the medians are reported.
  std::vector<double> loaded_ratio, quiet_ratio;
  load_result r;
  auto quiet_options = o;  // the server with one event stream and no status requests
  quiet_options.sse = 1;
  quiet_options.status = 0;
  std::printf("run of %zu cases, -j %zu, %zu round(s)\n", o.cases, o.concurrency, o.rounds);
  for (std::size_t round = 0; round < o.rounds; ++round) {
    double lib_rate = 0, srv_rate = 0, quiet_rate = 0;
    for (std::size_t k = 0; k < 3; ++k) {
      scratch dir;
      switch ((round + k) % 3) {
        case 0: {
          asio::io_context ctx{1};
          asio::co_spawn(ctx, library_run(o, dir.path), [&](std::exception_ptr e, double secs) {
            if (e) std::rethrow_exception(e);
            lib_rate = static_cast<double>(o.cases) / secs;
          });
          ctx.run();
          break;
        }
        case 1: {
          auto q = served_run(quiet_options, dir.path);
          quiet_rate = static_cast<double>(q.run_cases) / q.run_seconds;
          break;
        }
        default:
          r = served_run(o, dir.path);
          srv_rate = static_cast<double>(r.run_cases) / r.run_seconds;
      }
    }
    std::printf(
        "  round %zu: library %6.0f cases/s; server %6.0f under load (%zu SSE clients, %zu status "
        "requests), %6.0f quiet (one stream); ratios %.3f, %.3f\n",
        round + 1, lib_rate, srv_rate, o.sse, o.status, quiet_rate, srv_rate / lib_rate,
        quiet_rate / lib_rate);
    loaded_ratio.push_back(srv_rate / lib_rate);
    quiet_ratio.push_back(quiet_rate / lib_rate);
  }
  std::printf("server/library throughput, median of %zu rounds: %.3f under load, %.3f quiet\n",
              o.rounds, percentile(loaded_ratio, 0.5), percentile(quiet_ratio, 0.5));
  std::printf(
      "status requests (last round): %zu in %.3f s = %.0f requests/s; p50 %.2f ms, p99 %.2f ms; "
      "%zu answered while the run went\n",
      r.latencies_ms.size(), r.status_seconds,
      static_cast<double>(r.latencies_ms.size()) / r.status_seconds,
      percentile(r.latencies_ms, 0.5), percentile(r.latencies_ms, 0.99), r.during_run);
  std::printf("event streams that saw every event to the end (last round): %zu of %zu\n",
              r.streams_complete, o.sse);
  return 0;
}
