// The server's I/O: an acceptor and one coroutine per connection (Boost.Beast) that reads a
// request within the limits, hands it to the sans-I/O layer (api.hpp) and the run manager, and
// writes the answer, or streams a run's events.
#include <mira/protocol/types.hpp>
#include <mira/serve/server.hpp>
#include <mira/version.hpp>
#include "serve/dashboard.hpp"
#include "serve/runs.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

namespace mira::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

std::optional<std::string> validate(const server_config& c) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(c.address, ec);
  if (ec) return "the listen address '" + c.address + "' is not an IP address";
  if (!address.is_loopback() && c.token.empty())
    return "listening on " + c.address +
           ", which is not a loopback address, needs a token (--token-file)";
  if (c.studies.empty()) return "no study is allowed (--study NAME=CMD)";
  for (std::size_t i = 0; i < c.studies.size(); ++i)
    for (std::size_t j = i + 1; j < c.studies.size(); ++j)
      if (c.studies[i].name == c.studies[j].name)
        return "the study name '" + c.studies[i].name + "' is given twice";
  if (c.max_runs == 0) return "the run limit must be at least 1";
  if (c.max_cases == 0) return "the case limit must be at least 1";
  if (c.max_connections == 0) return "the connection limit must be at least 1";
  return std::nullopt;
}

namespace {

using request = http::request<http::string_body>;
using response = http::response<http::string_body>;

response make_response(http::status status, std::string_view content_type, std::string body) {
  response res{status, 11};
  res.set(http::field::server, "mira/" + std::string(version));
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.body() = std::move(body);
  return res;
}

response json_response(http::status status, const json::object& o) {
  return make_response(status, "application/json", json::serialize(o) + "\n");
}

response error_response(const api_error& e) {
  auto res = make_response(static_cast<http::status>(e.status), "application/json", error_body(e));
  if (e.retry_after) res.set(http::field::retry_after, std::to_string(*e.retry_after));
  if (e.status == 401) res.set(http::field::www_authenticate, "Bearer");
  return res;
}

// A saved run's stream: its status as the one "end" event.
std::string saved_end_frame(const json::object& status) {
  run_event end;
  end.id = 1;
  end.type = "end";
  end.data = json::serialize(status);
  return sse_frame(end);
}

}  // namespace

struct server::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor e, server_config c)
      : ex(e),
        config(std::move(c)),
        acceptor(e),
        runs(e, config),
        conns_changed(
            std::make_shared<asio::steady_timer>(e, asio::steady_timer::time_point::max())) {}

  asio::any_io_executor ex;
  server_config config;
  tcp::acceptor acceptor;
  detail::run_manager runs;
  idempotency_keys keys;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  bool stopped = false;
  std::uint64_t next_conn = 0;
  std::map<std::uint64_t, beast::tcp_stream*> idle_streams;  // closed by stop()
  std::size_t connections = 0;
  std::shared_ptr<asio::steady_timer> conns_changed;

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(tcp::socket socket);
  asio::awaitable<void> linger(beast::tcp_stream& stream);
  asio::awaitable<bool> write(beast::tcp_stream& stream, response res, bool keep_alive);
  asio::awaitable<bool> handle(beast::tcp_stream& stream, request& req, std::uint64_t conn);
  asio::awaitable<tl::expected<response, api_error>> answer(const route_match& m,
                                                            const request_target& t, request& req);
  tl::expected<response, api_error> answer_now(const route_match& m);
  asio::awaitable<void> events(beast::tcp_stream& stream, request& req, const request_target& t,
                               const std::string& id);
};

asio::awaitable<void> server::impl::accept_loop() {
  auto self = shared_from_this();
  while (acceptor.is_open()) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (!acceptor.is_open()) co_return;
      // Out of descriptors and the like: back off instead of spinning.
      asio::steady_timer wait(ex, std::chrono::milliseconds(100));
      co_await wait.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    asio::co_spawn(ex, session(std::move(socket)), [](std::exception_ptr e) {
      // A connection's failure is its own: reported, never the server's end.
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::fprintf(stderr, "mira serve: a connection failed: %s\n", x.what());
      }
    });
  }
}

asio::awaitable<bool> server::impl::write(beast::tcp_stream& stream, response res,
                                          bool keep_alive) {
  res.keep_alive(keep_alive && !stopped);
  res.prepare_payload();
  stream.expires_after(config.idle_timeout);
  auto [ec, n] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
  co_return !ec && res.keep_alive();
}

// After refusing a request whose body is still coming: half-close and read the rest away (up to
// twice the body cap, within the idle timeout), so the client reads the answer instead of a
// reset.
asio::awaitable<void> server::impl::linger(beast::tcp_stream& stream) {
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::vector<char> sink(std::size_t{64} << 10);
  std::size_t drained = 0;
  stream.expires_after(config.idle_timeout);
  while (!ec && drained < 2 * config.max_body_bytes) {
    auto [e, n] =
        co_await stream.async_read_some(asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
    ec = e;
    drained += n;
  }
}

asio::awaitable<void> server::impl::session(tcp::socket socket) {
  auto self = shared_from_this();
  beast::tcp_stream stream(std::move(socket));
  const auto conn = ++next_conn;
  ++connections;
  struct leave {
    impl* s;
    std::uint64_t conn;
    ~leave() {
      s->idle_streams.erase(conn);
      --s->connections;
      s->conns_changed->cancel();
      s->conns_changed =
          std::make_shared<asio::steady_timer>(s->ex, asio::steady_timer::time_point::max());
    }
  } guard{this, conn};
  if (connections > config.max_connections) {
    auto e = make_error(
        503, "too_many_connections",
        "the server holds at most " + std::to_string(config.max_connections) + " connections");
    e.retry_after = 1;
    co_await write(stream, error_response(e), false);
    stream.socket().shutdown(tcp::socket::shutdown_send);
    co_return;
  }
  beast::flat_buffer buffer;
  bool first = true;
  while (!stopped) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(config.max_header_bytes));
    parser.body_limit(config.max_body_bytes);
    // A new connection's first header must come within header_timeout; a kept-alive one may
    // stay quiet for idle_timeout.
    stream.expires_after(first ? config.header_timeout : config.idle_timeout);
    idle_streams[conn] = &stream;
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser,
                                                    asio::as_tuple(asio::use_awaitable));
    idle_streams.erase(conn);
    if (ec == http::error::header_limit) {
      co_await write(
          stream,
          error_response(make_error(400, "header_too_large", "the request header is too large")),
          false);
      co_return;
    }
    // Beast refuses a Content-Length over the body limit while reading the header; a chunked
    // body is refused when it grows past the limit.
    bool too_large =
        ec == http::error::body_limit ||
        (!ec && parser.content_length() && *parser.content_length() > config.max_body_bytes);
    if (ec && !too_large) co_return;  // closed, timed out, or not HTTP
    first = false;
    if (!too_large && !parser.is_done()) {
      stream.expires_after(config.idle_timeout);
      auto [ec2, n2] =
          co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
      too_large = ec2 == http::error::body_limit;
      if (ec2 && !too_large) co_return;
    }
    if (too_large) {
      co_await write(
          stream,
          error_response(make_error(
              413, "body_too_large",
              "the body is larger than " + std::to_string(config.max_body_bytes) + " bytes")),
          false);
      co_await linger(stream);
      co_return;
    }
    auto req = parser.release();
    if (!co_await handle(stream, req, conn)) co_return;
  }
}

asio::awaitable<bool> server::impl::handle(beast::tcp_stream& stream, request& req, std::uint64_t) {
  const bool keep = req.keep_alive();
  auto t = parse_target(req.target());
  if (!t) co_return co_await write(stream, error_response(t.error()), keep);
  auto m = match_route(req.method_string(), t->path);
  if (!m) co_return co_await write(stream, error_response(m.error()), keep);
  if (m->spec->authenticated && !config.token.empty() &&
      !bearer_matches(req[http::field::authorization], config.token))
    co_return co_await write(
        stream,
        error_response(
            make_error(401, "unauthorized", "this route needs Authorization: Bearer <token>")),
        keep);
  if (m->spec->r == route::run_events) {
    co_await events(stream, req, *t, m->run_id);
    co_return false;
  }
  // No ?: with temporaries here: g++ 12 evaluates both arms of one inside a coroutine.
  auto res = co_await answer(*m, *t, req);
  if (!res) co_return co_await write(stream, error_response(res.error()), keep);
  co_return co_await write(stream, std::move(*res), keep);
}

namespace {

// The JSON answers are built here, outside the coroutines: g++ 12 miscompiles a braced list in
// a coroutine's expression (a json::object built from one came out corrupt).
response created(const std::string& id, bool replayed) {
  auto res = json_response(http::status::created, json::object{{"run_id", id}});
  res.set(http::field::location, "/v1/runs/" + id);
  if (replayed) res.set("Idempotent-Replayed", "true");
  return res;
}

response accepted(const std::string& id) {
  return json_response(http::status::accepted, json::object{{"run_id", id}});
}

api_error parameter_error(std::string parameter, std::string why) {
  return make_error(400, "invalid_parameter", parameter + ": " + why,
                    json::object{{"parameter", parameter}});
}

response page(std::string html) {
  auto res = make_response(http::status::ok, "text/html; charset=utf-8", std::move(html));
  res.set("Content-Security-Policy", detail::dashboard_csp());
  res.set("X-Frame-Options", "DENY");
  res.set("Referrer-Policy", "no-referrer");
  return res;
}

tl::expected<response, api_error> json_result(http::status s,
                                              tl::expected<json::object, api_error> o) {
  if (!o) return tl::unexpected(o.error());
  return json_response(s, *o);
}

}  // namespace

tl::expected<response, api_error> server::impl::answer_now(const route_match& m) {
  switch (m.spec->r) {
    case route::healthz:
      return json_response(
          http::status::ok,
          json::object{
              {"status", stopped ? "stopping" : "ok"},
              {"uptime_s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
              {"runs_active", runs.active()}});
    case route::version:
      return json_response(http::status::ok,
                           json::object{{"host", "mira-cpp"},
                                        {"version", version},
                                        {"protocol_version", protocol::protocol_version},
                                        {"api_version", api_version}});
    case route::openapi:
      return make_response(http::status::ok, "application/json", openapi_document());
    case route::studies: {
      json::array names;
      for (auto& s : config.studies) names.push_back(json::object{{"name", s.name}});
      return json_response(http::status::ok, json::object{{"studies", std::move(names)}});
    }
    case route::run_cancel:
      return json_result(http::status::accepted, runs.cancel(m.run_id));
    case route::dashboard:
      return page(detail::dashboard_page(""));
    case route::dashboard_run:
      return page(detail::dashboard_page(m.run_id));
    case route::dashboard_script:
      return make_response(http::status::ok, "text/javascript; charset=utf-8",
                           std::string(detail::dashboard_script()));
    default:
      break;
  }
  return tl::unexpected(make_error(404, "not_found", "no route for this path"));
}

asio::awaitable<tl::expected<response, api_error>> server::impl::answer(const route_match& m,
                                                                        const request_target& t,
                                                                        request& req) {
  auto self = shared_from_this();
  switch (m.spec->r) {
    case route::catalog:
      co_return json_result(http::status::ok, co_await runs.catalog(m.study));
    // What reads a saved run's folder is done off the executor (run_manager).
    case route::runs_list: {
      std::size_t limit = 50;
      if (auto l = t.param("limit")) {
        auto n = parse_last_event_id(*l);  // a plain decimal number
        if (!n || *n < 1 || *n > 200)
          co_return tl::unexpected(parameter_error("limit", "a number from 1 to 200"));
        limit = static_cast<std::size_t>(*n);
      }
      auto cursor = t.param("cursor").value_or("");
      if (!cursor.empty())
        if (auto why = check_run_id(cursor))
          co_return tl::unexpected(parameter_error("cursor", *why));
      co_return json_result(http::status::ok, co_await runs.list(limit, cursor));
    }
    case route::run_get:
      co_return json_result(http::status::ok, co_await runs.status(m.run_id));
    case route::run_cases: {
      auto text = co_await runs.cases(m.run_id, t.param("state"));
      if (!text) co_return tl::unexpected(text.error());
      co_return make_response(http::status::ok, "application/x-ndjson", std::move(*text));
    }
    case route::run_report: {
      auto r = co_await runs.report(m.run_id, t.param("format").value_or("json"));
      if (!r) co_return tl::unexpected(r.error());
      co_return make_response(http::status::ok, r->first, std::move(r->second));
    }
    case route::runs_create: {
      std::string key(req["Idempotency-Key"]);
      if (req.find("Idempotency-Key") != req.end() && !idempotency_keys::valid_key(key))
        co_return tl::unexpected(
            make_error(400, "invalid_idempotency_key",
                       "Idempotency-Key: up to 256 characters of A-Z a-z 0-9 . _ : / -"));
      auto decoded = decode_run_request(req[http::field::content_type], req.body());
      if (!decoded) co_return tl::unexpected(decoded.error());
      if (!key.empty()) {
        auto seen = keys.begin(key, req.body());
        using o = idempotency_keys::outcome;
        if (seen.what == o::conflict)
          co_return tl::unexpected(
              make_error(409, "idempotency_conflict",
                         "this Idempotency-Key was used with another request body"));
        if (seen.what == o::in_progress)
          co_return tl::unexpected(
              make_error(409, "idempotency_in_progress",
                         "a request with this Idempotency-Key is still being answered; retry it"));
        if (seen.what == o::replay) co_return created(seen.run_id, true);
      }
      auto id = co_await runs.start(std::move(*decoded));
      if (!id) {
        if (!key.empty()) keys.release(key);
        co_return tl::unexpected(id.error());
      }
      if (!key.empty()) keys.complete(key, *id);
      co_return created(*id, false);
    }
    case route::run_resume: {
      auto decoded = decode_resume_request(req[http::field::content_type], req.body());
      if (!decoded) co_return tl::unexpected(decoded.error());
      auto id = co_await runs.resume(m.run_id, *decoded);
      if (!id) co_return tl::unexpected(id.error());
      co_return accepted(*id);
    }
    default:
      co_return answer_now(m);
  }
}

asio::awaitable<void> server::impl::events(beast::tcp_stream& stream, request& req,
                                           const request_target& t, const std::string& id) {
  auto self = shared_from_this();
  std::uint64_t last = 0;
  auto given = t.param("last_event_id");
  if (auto header = req["Last-Event-ID"]; !header.empty()) given = std::string(header);
  if (given) {
    auto n = parse_last_event_id(*given);
    if (!n) {
      co_await write(stream,
                     error_response(make_error(400, "invalid_last_event_id",
                                               "Last-Event-ID: a decimal event id")),
                     false);
      co_return;
    }
    last = *n;
  }
  auto run = runs.live(id);
  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
      "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n";
  auto send = [&](std::string text) -> asio::awaitable<bool> {
    stream.expires_after(config.idle_timeout);
    auto [ec, n] =
        co_await asio::async_write(stream, asio::buffer(text), asio::as_tuple(asio::use_awaitable));
    co_return !ec;
  };
  if (!run) {
    // A saved run this server did not run: its end, once.
    auto s = co_await runs.status(id);
    if (!s) {
      co_await write(stream, error_response(s.error()), false);
      co_return;
    }
    if (last < 1) head += saved_end_frame(*s);
    co_await send(std::move(head));
    co_return;
  }
  // The header and what has happened so far in one write: a client sees the run's state at once.
  for (auto& e : run->events.after(last)) head += sse_frame(e);
  last = std::max(last, run->events.last_id());
  if (!co_await send(std::move(head))) co_return;
  asio::steady_timer keepalive(ex);
  for (;;) {
    auto pending = run->events.after(last);
    if (!pending.empty()) {
      std::string text;
      for (auto& e : pending) text += sse_frame(e);
      last = pending.back().id;
      if (!co_await send(std::move(text))) co_return;
      if (run->finished || config.event_interval.count() == 0) continue;
      // Events that come meanwhile go out together: with many clients, one wake-up and one
      // write per client per interval instead of per event.
      keepalive.expires_after(config.event_interval);
      co_await keepalive.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    if (run->finished) co_return;
    auto notify = run->notify;
    keepalive.expires_after(config.keepalive);
    auto woke = co_await (notify->async_wait(asio::as_tuple(asio::use_awaitable)) ||
                          keepalive.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (woke.index() == 1 && !co_await send(": keepalive\n\n")) co_return;
  }
}

server::server(asio::any_io_executor ex, server_config config)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(config))) {}

server::~server() {
  boost::system::error_code ec;
  impl_->acceptor.close(ec);
}

tl::expected<tcp::endpoint, std::string> server::start() {
  if (auto why = validate(impl_->config)) return tl::unexpected(*why);
  boost::system::error_code ec;
  std::filesystem::create_directories(impl_->config.results_dir, ec);
  if (ec)
    return tl::unexpected("cannot create the results directory " +
                          impl_->config.results_dir.string() + ": " + ec.message());
  tcp::endpoint ep(asio::ip::make_address(impl_->config.address), impl_->config.port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    a.close();
    return tl::unexpected("cannot listen on " + impl_->config.address + ":" +
                          std::to_string(impl_->config.port) + ": " + ec.message());
  }
  impl_->runs.set_owner(impl_);
  asio::co_spawn(impl_->ex, impl_->accept_loop(), asio::detached);
  return a.local_endpoint();
}

tcp::endpoint server::local_endpoint() const {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec);
}

const server_config& server::config() const {
  return impl_->config;
}

asio::awaitable<void> server::stop() {
  auto s = impl_;
  if (s->stopped) co_return;
  s->stopped = true;
  boost::system::error_code ec;
  s->acceptor.close(ec);
  co_await s->runs.stop();
  // Connections waiting for a request are closed; the others end after their answer (an event
  // stream after its run's end, which has come now).
  for (auto& [id, stream] : s->idle_streams) stream->socket().close(ec);
  while (s->connections > 0) {
    auto t = s->conns_changed;
    co_await t->async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace mira::serve
