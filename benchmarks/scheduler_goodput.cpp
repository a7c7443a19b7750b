// Scheduler goodput against a provider with a fixed capacity.
//
//   scheduler_goodput [-n CASES] [-k CAPACITY] [-l LATENCY_MS] [-j MAX_CONCURRENT] [-r ROUNDS]
//
// A simulated study (in process, over a socket pair) serves at most K runs at once, each taking
// L ms, and answers a run beyond K at once with a retryable 429. run_plan pushes N cases through
// it with the default adaptive policy. Prints the makespan over the ideal N*L/K (1.0 is perfect),
// and how many attempts were rejected.
#include <mira/host.hpp>
#include <mira/schedule/run_plan.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>

namespace asio = boost::asio;
namespace json = boost::json;
using socket_t = asio::local::stream_protocol::socket;

namespace {

// The provider: K slots, L ms per run, 429 beyond K.
class provider {
 public:
  provider(asio::any_io_executor ex, std::size_t capacity, std::chrono::milliseconds latency)
      : in_(ex), out_(ex), capacity_(capacity), latency_(latency) {}

  std::pair<socket_t, socket_t> host_ends(const asio::any_io_executor& ex) {
    socket_t reads(ex), writes(ex);
    asio::local::connect_pair(reads, out_);
    asio::local::connect_pair(writes, in_);
    return {std::move(reads), std::move(writes)};
  }

  asio::awaitable<void> serve() {
    std::string buf;
    for (;;) {
      auto [ec, n] = co_await asio::async_read_until(in_, asio::dynamic_buffer(buf), '\n',
                                                     asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      auto req = json::parse(std::string_view(buf).substr(0, n - 1)).as_object();
      buf.erase(0, n);
      auto method = std::string(req.at("method").as_string());
      json::value id = req.at("id");
      if (method == "initialize") {
        send(json::object{{"id", id},
                          {"result", json::object{{"protocol_version", "1.1"},
                                                  {"study", "provider"},
                                                  {"evals", 1},
                                                  {"capabilities", json::array{"cancel"}}}}});
      } else if (method == "run") {
        if (active_ >= capacity_) {
          ++rejected_;
          send(json::object{{"id", id},
                            {"error", json::object{{"code", -32000},
                                                   {"message", "429 Too Many Requests"},
                                                   {"retryable", true},
                                                   {"data", json::object{{"http_status", 429}}}}}});
          continue;
        }
        ++active_;
        asio::co_spawn(in_.get_executor(), finish_later(id, req.at("params").as_object()),
                       asio::detached);
      } else {
        send(json::object{{"id", id}, {"result", json::object{{"cancelled", false}}}});
      }
    }
  }

  std::size_t rejected() const { return rejected_; }

 private:
  asio::awaitable<void> finish_later(json::value id, json::object params) {
    asio::steady_timer t(in_.get_executor(), latency_);
    co_await t.async_wait(asio::use_awaitable);
    --active_;
    params["passed"] = true;
    params["aggregate"] = 1.0;
    params["scores"] = json::array{};
    params["transcript"] = json::object{{"final_response", ""}};
    send(json::object{{"id", id}, {"result", std::move(params)}});
  }

  void send(const json::object& o) {
    queue_.push_back(json::serialize(o) + "\n");
    if (queue_.size() == 1) write_next();
  }

  void write_next() {
    asio::async_write(out_, asio::buffer(queue_.front()),
                      [this](boost::system::error_code ec, std::size_t) {
                        queue_.pop_front();
                        if (!ec && !queue_.empty()) write_next();
                      });
  }

  socket_t in_, out_;
  std::size_t capacity_;
  std::chrono::milliseconds latency_;
  std::size_t active_ = 0;
  std::size_t rejected_ = 0;
  std::deque<std::string> queue_;
};

struct figures {
  double seconds = 0;
  std::size_t rejected = 0;
  std::size_t passed = 0;
};

figures one_round(std::size_t n, std::size_t k, std::chrono::milliseconds latency, std::size_t j,
                  std::uint64_t seed) {
  asio::io_context ctx;
  provider prov(ctx.get_executor(), k, latency);
  auto [reads, writes] = prov.host_ends(ctx.get_executor());
  mira::host_options o;
  o.log = [](const mira::log_record&) {};
  auto host = mira::host_handle::connect(std::move(reads), std::move(writes), o);
  asio::co_spawn(ctx, prov.serve(), asio::detached);

  mira::protocol::list_result list;
  mira::protocol::eval_info e;
  e.name = "bench";
  e.targets.push_back({"sim", "provider", true, {}});
  for (std::size_t i = 0; i < n; ++i) e.samples.push_back({std::to_string(i), {}, {}});
  list.evals.push_back(std::move(e));
  auto p = mira::plan::make_plan(list);

  figures f;
  asio::co_spawn(
      ctx,
      [&]() -> asio::awaitable<void> {
        auto init = co_await host.initialize();
        if (!init) std::exit(1);
        mira::schedule::run_policy policy;
        policy.concurrency.max_concurrent = j;
        policy.retry.max_retries = 100;
        policy.jitter_seed = seed;
        auto report = co_await mira::schedule::run_plan(host, *p, policy);
        f.seconds = report.seconds;
        for (auto& c : report.cases) f.passed += c.state == mira::schedule::case_state::passed;
        co_await host.shutdown();
      },
      asio::detached);
  ctx.run();
  f.rejected = prov.rejected();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 400, k = 8, j = 32, rounds = 3;
  long latency_ms = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    auto v = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "-n")
      n = v;
    else if (a == "-k")
      k = v;
    else if (a == "-l")
      latency_ms = static_cast<long>(v);
    else if (a == "-j")
      j = v;
    else if (a == "-r")
      rounds = v;
  }
  double ideal =
      static_cast<double>(n) * static_cast<double>(latency_ms) / 1000.0 / static_cast<double>(k);
  std::printf(
      "scheduler_goodput n=%zu capacity=%zu latency_ms=%ld max_concurrent=%zu ideal_s=%.3f\n", n, k,
      latency_ms, j, ideal);
  for (std::size_t r = 0; r < rounds; ++r) {
    auto f = one_round(n, k, std::chrono::milliseconds(latency_ms), j, r + 1);
    std::printf("round %zu makespan_s %.3f ratio %.3f passed %zu rejected_attempts %zu\n", r + 1,
                f.seconds, f.seconds / ideal, f.passed, f.rejected);
  }
  return 0;
}
