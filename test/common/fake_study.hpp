// An in-memory study for host tests: two local socket pairs stand in for the child's pipes, and
// the test plays the study by reading the host's frames and writing lines back.
#pragma once

#include <mira/host.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace mira::test {

namespace asio = boost::asio;
namespace json = boost::json;
using socket_t = asio::local::stream_protocol::socket;

/// Log records kept for assertions.
struct captured_log {
  std::mutex mutex;
  std::vector<std::pair<log_level, std::string>> records;
  log_sink sink() {
    return [this](const log_record& r) {
      std::lock_guard lock(mutex);
      records.emplace_back(r.level, std::string(r.message) + " | " + std::string(r.excerpt));
    };
  }
  std::size_t count(log_level l, std::string_view needle) {
    std::lock_guard lock(mutex);
    std::size_t n = 0;
    for (auto& [lvl, text] : records)
      if (lvl == l && text.find(needle) != std::string::npos) ++n;
    return n;
  }
};

class fake_study {
 public:
  explicit fake_study(const asio::any_io_executor& ex) : to_study_(ex), from_study_(ex) {}

  /// The host end: what the host reads (study output) and writes (study input).
  std::pair<socket_t, socket_t> host_ends(const asio::any_io_executor& ex) {
    socket_t host_reads(ex), host_writes(ex);
    asio::local::connect_pair(host_reads, from_study_);
    asio::local::connect_pair(host_writes, to_study_);
    return {std::move(host_reads), std::move(host_writes)};
  }

  /// Next frame the host sent (a request), parsed.
  asio::awaitable<json::object> read() {
    auto [ec, n] = co_await asio::async_read_until(to_study_, asio::dynamic_buffer(buf_), '\n',
                                                   asio::as_tuple(asio::use_awaitable));
    // An exception, not a Boost.Test macro: the study may run on another thread than the
    // test, and Boost.Test is not thread-safe.
    if (ec) throw std::runtime_error("fake study: reading failed: " + ec.message());
    std::string line = buf_.substr(0, n - 1);
    buf_.erase(0, n);
    co_return json::parse(line).as_object();
  }

  asio::awaitable<void> write(std::string line) {
    line += '\n';
    co_await asio::async_write(from_study_, asio::buffer(line), asio::use_awaitable);
  }

  asio::awaitable<void> reply(const json::object& req, json::value result) {
    json::object o{{"id", req.at("id")}, {"result", std::move(result)}};
    co_await write(json::serialize(o));
  }

  asio::awaitable<void> reply_error(const json::object& req, std::string message,
                                    bool retryable = false) {
    json::object err{{"message", message}};
    if (retryable) err["retryable"] = true;
    json::object o{{"id", req.at("id")}, {"error", std::move(err)}};
    co_await write(json::serialize(o));
  }

  /// Answers initialize with the given capabilities.
  /// Answers initialize advertising `caps` (comma-separated).
  asio::awaitable<void> accept_initialize(std::string caps = "cancel",
                                          std::string version = "1.1") {
    auto req = co_await read();
    if (req.at("method").as_string() != "initialize")
      throw std::runtime_error("fake study: expected initialize, got " + json::serialize(req));
    json::array c;
    for (std::size_t pos = 0; pos < caps.size();) {
      auto end = caps.find(',', pos);
      if (end == std::string::npos) end = caps.size();
      c.emplace_back(caps.substr(pos, end - pos));
      pos = end + 1;
    }
    // Named first: g++ 12 rejects a braced list inside a co_await expression.
    json::object result{{"protocol_version", version},
                        {"study", "fake"},
                        {"evals", 1},
                        {"capabilities", std::move(c)}};
    co_await reply(req, std::move(result));
  }

  void close_output() { from_study_.close(); }
  void close_input() { to_study_.close(); }
  socket_t& input() { return to_study_; }

 private:
  socket_t to_study_;    // study reads the host's requests here
  socket_t from_study_;  // study writes responses here
  std::string buf_;
};

/// A one-shot event a coroutine can wait on (a timer that never expires, cancelled by set()).
class event {
 public:
  explicit event(const asio::any_io_executor& ex)
      : timer_(ex, std::chrono::steady_clock::time_point::max()) {}
  void set() {
    set_ = true;
    timer_.cancel();
  }
  bool is_set() const { return set_; }
  asio::awaitable<void> wait() {
    while (!set_) co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
  }

 private:
  asio::steady_timer timer_;
  bool set_ = false;
};

/// A RunResult echoing the request's identity; passed unless told otherwise.
// The study side of the fail-fast tests: reads three runs, fails the second, then acknowledges
// the two cancels that follow (their ids into `cancelled`) and sets `done`.
inline asio::awaitable<void> fail_second_of_three(fake_study& study,
                                                  std::vector<std::int64_t>& cancelled,
                                                  event& done) {
  std::vector<json::object> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(co_await study.read());
  co_await study.reply_error(runs[1], "subject crashed");
  for (int i = 0; i < 2; ++i) {
    auto c = co_await study.read();
    cancelled.push_back(c.at("params").at("id").as_int64());
    co_await study.reply(c, json::parse(R"({"cancelled":true})"));
  }
  done.set();
}

inline json::object run_result_for(const json::object& req, bool passed = true) {
  auto& p = req.at("params").as_object();
  return json::object{{"eval", p.at("eval")},
                      {"sample", p.at("sample")},
                      {"target", p.at("target")},
                      {"passed", passed},
                      {"aggregate", passed ? 1.0 : 0.0},
                      {"scores", json::array{}},
                      {"transcript", json::object{{"final_response", "ok"}}},
                      {"echo_id", req.at("id")}};
}

inline protocol::run_params run_case(std::string sample) {
  protocol::run_params p;
  p.eval = "e";
  p.sample = std::move(sample);
  p.target = "sim";
  return p;
}

inline host_options quiet_options(captured_log* log = nullptr) {
  host_options o;
  o.log = log ? log->sink() : log_sink([](const log_record&) {});
  return o;
}

/// A connected host and its fake study.
struct fake_pair {
  fake_pair(const asio::any_io_executor& ex, host_options opts = quiet_options())
      : study(std::make_unique<fake_study>(ex)) {
    auto [r, w] = study->host_ends(ex);
    host = std::make_unique<host_handle>(
        host_handle::connect(std::move(r), std::move(w), std::move(opts)));
  }
  std::unique_ptr<fake_study> study;
  std::unique_ptr<host_handle> host;
};

/// `fp`'s host initialized, its study answering with capabilities `caps` ("a,b"). A string,
/// not a braced list: g++ 12 rejects braced lists inside a co_await expression, default
/// arguments included.
inline asio::awaitable<void> initialized(fake_pair& fp, std::string caps = "cancel") {
  auto ex = co_await asio::this_coro::executor;
  asio::co_spawn(ex, fp.study->accept_initialize(std::move(caps)), asio::detached);
  auto init = co_await fp.host->initialize();
  BOOST_REQUIRE(init);
}

}  // namespace mira::test
