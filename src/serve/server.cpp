// The server's I/O: an acceptor and one coroutine per connection (Boost.Beast) that reads a
// request within the limits, hands it to the sans-I/O layer (api.hpp) and the run manager, and
// writes the answer, or streams a run's events.
#include <mira/protocol/types.hpp>
#include <mira/serve/server.hpp>
#include <mira/version.hpp>
#include "serve/api.hpp"
#include "serve/case_pages.hpp"
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
#include <atomic>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace mira::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

std::optional<error> validate(const server_config& c) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(c.address, ec);
  if (ec)
    return error{errc::invalid_address,
                 "the listen address '" + c.address + "' is not an IP address"};
  if (!address.is_loopback() && c.token.empty())
    return error{errc::token_required,
                 "listening on " + c.address +
                     ", which is not a loopback address, needs a token (--token-file)"};
  if (c.studies.empty() && !c.read_only)
    return error{errc::no_study, "no study is allowed (--study NAME=CMD)"};
  for (std::size_t i = 0; i < c.studies.size(); ++i)
    for (std::size_t j = i + 1; j < c.studies.size(); ++j)
      if (c.studies[i].name == c.studies[j].name)
        return error{errc::duplicate_study,
                     "the study name '" + c.studies[i].name + "' is given twice"};
  if (c.max_runs == 0) return error{errc::invalid_limit, "the run limit must be at least 1"};
  if (c.max_cases == 0) return error{errc::invalid_limit, "the case limit must be at least 1"};
  if (c.max_connections == 0)
    return error{errc::invalid_limit, "the connection limit must be at least 1"};
  if (c.max_connections_per_client == 0)
    return error{errc::invalid_limit, "the per-client connection limit must be at least 1"};
  if (c.max_procs == 0)
    return error{errc::invalid_limit, "the process limit of a run must be at least 1"};
  return std::nullopt;
}

namespace {

using request = http::request<http::string_body>;
// A response's body, shared: a report read by many clients at once is held once (runs.hpp,
// shared_reports). Beast only measures it; the server writes its bytes itself (write()).
struct shared_text_body {
  using value_type = std::shared_ptr<const std::string>;
  static std::uint64_t size(const value_type& v) { return v ? v->size() : 0; }
};
using response = http::response<shared_text_body>;

// What one write may take: the most a client that stops reading makes the server hold beyond
// the answer itself, and what an event stream gathers before it writes.
constexpr std::size_t send_slice = std::size_t{64} << 10;
// How long stop() lets answers under way finish before it closes their connections.
constexpr std::chrono::milliseconds stop_grace{500};

// Beast's request parser with the bounds it lacks. Trailers are dropped: Beast would add them to
// the header (where a later Host or Authorization could hide), and one longer than its fields
// can hold throws length_error out of the read, past the connection. The read buffer's cap
// (max_header_bytes) bounds a chunk's header line and the trailers; here a chunk's extensions
// are bounded too, as each is only skipped. A header field Beast cannot hold is header_limit.
class request_reader : public http::request_parser<http::string_body> {
 public:
  static constexpr std::size_t max_chunk_extension_bytes = 4096;
  static constexpr std::size_t max_request_extension_bytes = 64 << 10;
  bool extensions_too_large() const { return extensions_too_large_; }

 private:
  void on_field_impl(http::field f, beast::string_view name, beast::string_view value,
                     beast::error_code& ec) override {
    if (is_header_done()) return;  // a trailer
    try {
      get().insert(f, name, value);
    } catch (const std::length_error&) {
      ec = http::error::header_limit;
    }
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view extensions,
                            beast::error_code& ec) override {
    extension_bytes_ += extensions.size();
    if (extensions.size() > max_chunk_extension_bytes ||
        extension_bytes_ > max_request_extension_bytes) {
      extensions_too_large_ = true;
      ec = http::error::bad_chunk_extension;
    }
  }

  std::size_t extension_bytes_ = 0;
  bool extensions_too_large_ = false;
};

// How a read that failed with `ec` is answered: a bound or broken framing gets its 4xx; a
// connection closed, reset or timed out gets nothing.
std::optional<api_error> read_refusal(const beast::error_code& ec, const request_reader& reader,
                                      const server_config& c) {
  if (ec == http::error::body_limit)
    return make_error(413, "body_too_large",
                      "the body is larger than " + std::to_string(c.max_body_bytes) + " bytes");
  if (ec == http::error::header_limit)
    return make_error(400, "header_too_large", "the request header is too large");
  if (reader.extensions_too_large())
    return make_error(
        400, "chunk_extensions_too_large",
        "chunk extensions may hold " + std::to_string(request_reader::max_chunk_extension_bytes) +
            " bytes a chunk and " + std::to_string(request_reader::max_request_extension_bytes) +
            " a request");
  if (ec == http::error::buffer_overflow)
    return make_error(400, "chunk_header_too_large",
                      "a chunk header line or the trailers are larger than " +
                          std::to_string(c.max_header_bytes) + " bytes");
  if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message)
    return make_error(400, "bad_request", "the request is not valid HTTP/1.1: " + ec.message());
  return std::nullopt;
}

response make_response(http::status status, std::string_view content_type,
                       shared_text_body::value_type body) {
  response res{status, 11};
  res.set(http::field::server, "mira/" + std::string(version));
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.body() = std::move(body);
  return res;
}

response make_response(http::status status, std::string_view content_type, std::string body) {
  return make_response(status, content_type, std::make_shared<const std::string>(std::move(body)));
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
  struct connection {
    beast::tcp_stream* stream = nullptr;
    asio::ip::address peer;
    // Waiting for or reading a request, or lingering after a refusal: stop() closes it (the
    // others end after their answer).
    bool interruptible = false;
    // It sent the token: never closed to make room while it reads what it is sent. With no
    // token configured nothing proves a connection, and one waiting for a request may be closed.
    bool authenticated = false;
    // A write is under way: since `waiting_since`, the last time the client took a slice. One that
    // does not read stays so, and is closed first to make room, whatever it sent.
    bool writing = false;
    bool counted = true;  // in `connections` and `clients`; not once closed to make room
    std::chrono::steady_clock::time_point waiting_since;  // for its request, or its write's slice
  };
  std::map<std::uint64_t, connection> conns;  // every session until it ends
  std::size_t connections = 0;
  std::map<asio::ip::address, std::size_t> clients;  // connections by peer address
  std::shared_ptr<asio::steady_timer> conns_changed;

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(tcp::socket socket);
  asio::awaitable<void> linger(beast::tcp_stream& stream, std::uint64_t conn);
  std::optional<api_error> make_room(const asio::ip::address& peer);
  bool close_oldest_evictable(const asio::ip::address* from);
  void uncount(connection& c);
  std::optional<api_error> misdirected(const request& req) const;
  bool token_given(const request& req) const;
  std::optional<api_error> refuse_before_body(const request& req) const;
  std::optional<response> token_redirect(const route_match& m, const request_target& t) const;
  asio::awaitable<bool> send(beast::tcp_stream& stream, std::uint64_t conn, std::string_view data);
  asio::awaitable<bool> write(beast::tcp_stream& stream, std::uint64_t conn, response res,
                              bool keep_alive);
  asio::awaitable<bool> handle(beast::tcp_stream& stream, request& req, std::uint64_t conn);
  asio::awaitable<tl::expected<response, api_error>> answer(
      const route_match& m, const request_target& t, request& req,
      detail::run_manager::abandoned gone = {});
  tl::expected<response, api_error> answer_now(const route_match& m);
  asio::awaitable<void> events(beast::tcp_stream& stream, std::uint64_t conn, request& req,
                               const request_target& t, const std::string& id);
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
    asio::co_spawn(ex, session(std::move(socket)), [self](std::exception_ptr e) {
      // A connection's failure is its own: reported, never the server's end.
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::string message = std::string("a server connection failed: ") + x.what();
        log_record r;
        r.level = log_level::error;
        r.message = message;
        if (self->config.log) self->config.log(r);
      }
    });
  }
}

asio::awaitable<bool> server::impl::write(beast::tcp_stream& stream, std::uint64_t conn,
                                          response res, bool keep_alive) {
  res.keep_alive(keep_alive && !stopped);
  // No page may be framed, whatever its own <meta> policy says: a saved report's cannot say
  // frame-ancestors, which only a header can.
  if (has_media_type(res[http::field::content_type], "text/html")) {
    if (res.find("Content-Security-Policy") == res.end())
      res.set("Content-Security-Policy", "frame-ancestors 'none'");
    res.set(http::field::x_frame_options, "DENY");
  }
  res.prepare_payload();
  std::ostringstream head;
  head << res.base();
  const std::string_view body = res.body() ? std::string_view(*res.body()) : std::string_view();
  // A small answer goes out in one write (the socket has no Nagle delay, see session()).
  if (body.size() <= send_slice) {
    auto text = std::move(head).str();
    text += body;
    co_return co_await send(stream, conn, text) && res.keep_alive();
  }
  auto header = std::move(head).str();
  if (!co_await send(stream, conn, header)) co_return false;
  co_return co_await send(stream, conn, body) && res.keep_alive();
}

// Writes `data` a slice at a time, each within write_timeout: a client that reads slowly but
// steadily gets it all, one that stops reading is closed, and meanwhile its connection is the
// first to make room for a newcomer.
asio::awaitable<bool> server::impl::send(beast::tcp_stream& stream, std::uint64_t conn,
                                         std::string_view data) {
  auto& c = conns.at(conn);
  c.writing = true;
  struct done_writing {
    connection& c;
    ~done_writing() { c.writing = false; }
  } guard{c};
  while (!data.empty()) {
    auto slice = data.substr(0, send_slice);
    c.waiting_since = std::chrono::steady_clock::now();
    stream.expires_after(config.write_timeout);
    auto [ec, n] = co_await asio::async_write(stream, asio::buffer(slice.data(), slice.size()),
                                              asio::as_tuple(asio::use_awaitable));
    if (ec) co_return false;
    data.remove_prefix(n);
  }
  co_return true;
}

// After refusing a request whose body is still coming (never after a refused header): half-close
// and read the rest away (up to twice the body cap, within the idle timeout, until stop()), so the
// client reads the answer instead of a reset.
asio::awaitable<void> server::impl::linger(beast::tcp_stream& stream, std::uint64_t conn) {
  if (stopped) co_return;
  conns.at(conn).interruptible = true;
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::vector<char> sink(std::size_t{8} << 10);
  std::size_t drained = 0;
  stream.expires_after(config.idle_timeout);
  while (!ec && drained < 2 * config.max_body_bytes) {
    auto [e, n] =
        co_await stream.async_read_some(asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
    ec = e;
    drained += n;
  }
}

void server::impl::uncount(connection& c) {
  if (!c.counted) return;
  c.counted = false;
  if (--clients[c.peer] == 0) clients.erase(c.peer);
  --connections;
}

// Closes the connection (from `from`, if given) that has waited longest, either for the client
// to take a slice of what it is sent (whatever it sent), or for a request without ever sending
// the token (with no token configured, any connection between requests).
bool server::impl::close_oldest_evictable(const asio::ip::address* from) {
  auto oldest = conns.end();
  for (auto it = conns.begin(); it != conns.end(); ++it) {
    auto& c = it->second;
    const bool evictable = c.writing || (c.interruptible && !c.authenticated);
    if (!c.counted || !evictable || (from && c.peer != *from)) continue;
    // Ids grow with time: the first of equal times is the older.
    if (oldest == conns.end() || c.waiting_since < oldest->second.waiting_since) oldest = it;
  }
  if (oldest == conns.end()) return false;
  uncount(oldest->second);
  boost::system::error_code ec;
  oldest->second.stream->socket().close(ec);  // its session ends with the aborted read
  return true;
}

// A newcomer from `peer` beyond a cap takes the place of a connection that does not read or has
// proved nothing (one from the same address for the per-address cap), so neither silent nor
// non-reading connections can lock a client out; with none to close, the newcomer is refused.
std::optional<api_error> server::impl::make_room(const asio::ip::address& peer) {
  std::optional<api_error> e;
  if (clients[peer] > config.max_connections_per_client && !close_oldest_evictable(&peer))
    e = make_error(503, "too_many_connections",
                   "the server holds at most " + std::to_string(config.max_connections_per_client) +
                       " connections from one address");
  else if (connections > config.max_connections && !close_oldest_evictable(nullptr))
    e = make_error(
        503, "too_many_connections",
        "the server holds at most " + std::to_string(config.max_connections) + " connections");
  if (e) e->retry_after = 1;
  return e;
}

asio::awaitable<void> server::impl::session(tcp::socket socket) {
  auto self = shared_from_this();
  boost::system::error_code ignored;
  const auto peer = socket.remote_endpoint(ignored).address();
  // Answers go out whole or in send_slice slices: nothing waits for an acknowledgement.
  socket.set_option(tcp::no_delay(true), ignored);
  beast::tcp_stream stream(std::move(socket));
  const auto conn = ++next_conn;
  auto& entry = conns[conn];
  entry.stream = &stream;
  entry.peer = peer;
  entry.waiting_since = std::chrono::steady_clock::now();
  ++connections;
  ++clients[peer];
  struct leave {
    impl* s;
    std::uint64_t conn;
    ~leave() {
      s->uncount(s->conns.at(conn));
      s->conns.erase(conn);
      s->conns_changed->cancel();
      s->conns_changed =
          std::make_shared<asio::steady_timer>(s->ex, asio::steady_timer::time_point::max());
    }
  } guard{this, conn};
  if (auto e = make_room(peer)) {
    co_await write(stream, conn, error_response(*e), false);
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    co_return;
  }
  // The buffer holds what the parser has not taken yet: a header, a chunk's header line, the
  // trailers. Its cap bounds them all.
  beast::flat_buffer buffer(config.max_header_bytes);
  bool first = true;
  while (!stopped) {
    request_reader parser;
    parser.header_limit(static_cast<std::uint32_t>(config.max_header_bytes));
    parser.body_limit(config.max_body_bytes);
    // A new connection's first header must come within header_timeout; a kept-alive one may
    // stay quiet for idle_timeout.
    stream.expires_after(first ? config.header_timeout : config.idle_timeout);
    conns.at(conn).interruptible = true;
    if (!first) conns.at(conn).waiting_since = std::chrono::steady_clock::now();
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser,
                                                    asio::as_tuple(asio::use_awaitable));
    // The token proves a connection as soon as its header has come, before its body is read.
    if (!ec && !config.token.empty() && token_given(parser.get()))
      conns.at(conn).authenticated = true;
    if (!ec) {
      // A body is read only for a request that will be answered: its Host, Origin, framing and
      // token are checked first, so a client without the token costs no body's memory.
      if (auto refusal = refuse_before_body(parser.get())) {
        conns.at(conn).interruptible = false;
        co_await write(stream, conn, error_response(*refusal), false);
        // A refused framing (400) has no length to read away; any other body is read away.
        if (!parser.is_done() && refusal->status != 400) co_await linger(stream, conn);
        co_return;
      }
    }
    // Beast refuses a Content-Length over the body limit while reading the header; a chunked
    // body is refused when it grows past the limit.
    beast::error_code failed = ec;
    bool in_body = false;
    if (!failed && !parser.is_done()) {
      stream.expires_after(config.idle_timeout);
      in_body = true;
      auto [ec2, n2] =
          co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
      failed = ec2;
    }
    conns.at(conn).interruptible = false;
    if (failed) {
      if (auto refusal = read_refusal(failed, parser, config)) {
        co_await write(stream, conn, error_response(*refusal), false);
        // Only a body may still be coming (a 413 on the Content-Length included): after a
        // refused header nothing more is due, and lingering would hold the connection's place
        // for idle_timeout instead of header_timeout.
        if (in_body || failed == http::error::body_limit) co_await linger(stream, conn);
      }
      co_return;
    }
    first = false;
    auto req = parser.release();
    if (!co_await handle(stream, req, conn)) co_return;
  }
}

std::optional<api_error> server::impl::misdirected(const request& req) const {
  auto hosts = req.count(http::field::host);
  auto host = req[http::field::host];
  if (hosts > 1) return make_error(400, "bad_host", "the request has more than one Host header");
  // HTTP/1.0 too: the Host is what tells this server from a rebound name (RFC 9112 3.2).
  if (hosts == 0) return make_error(400, "missing_host", "a request needs a Host header");
  if (hosts == 1 && !host_allowed(host, config.address, config.allowed_hosts))
    return make_error(421, "misdirected_request",
                      "this server does not answer for the host '" + std::string(host) +
                          "' (mira serve --allow-host NAME allows a name)",
                      json::object{{"host", host}});
  // A page on another site may send a POST without asking first (no-cors); its Origin says so.
  auto origin = req.find(http::field::origin);
  if (req.method() != http::verb::get && req.method() != http::verb::head && origin != req.end() &&
      !origin_allowed(origin->value(), host, config.allowed_hosts))
    return make_error(403, "foreign_origin",
                      "requests that change state are only taken from this server's own pages",
                      json::object{{"origin", origin->value()}});
  return std::nullopt;
}

// The token, as `Authorization: Bearer`, or on a GET as the cookie the dashboard sets: a page of
// another site cannot send it (SameSite=Strict), and a GET changes nothing.
bool server::impl::token_given(const request& req) const {
  if (bearer_matches(req[http::field::authorization], config.token)) return true;
  return (req.method() == http::verb::get || req.method() == http::verb::head) &&
         cookie_token_matches(req[http::field::cookie], config.token);
}

// A page opened from the URL `mira view` prints (`?token=`): the token goes into a cookie
// (HttpOnly, SameSite=Strict: no script and no other site's page gets it) and the browser to
// the same page without it, so the token is neither kept in the history nor sent on as a
// Referer.
std::optional<response> server::impl::token_redirect(const route_match& m,
                                                     const request_target& t) const {
  auto given = t.param("token");
  if (!given || m.spec->authenticated || m.spec->produces != "text/html") return std::nullopt;
  if (!config.token.empty() && !bearer_matches("Bearer " + *given, config.token))
    return error_response(
        make_error(401, "unauthorized", "the token in this URL is not this server's"));
  std::string to = percent_encode(t.path, true);
  char sep = '?';
  for (auto& [k, v] : t.query) {
    if (k == "token") continue;
    to += sep + percent_encode(k, false) + '=' + percent_encode(v, false);
    sep = '&';
  }
  auto res = make_response(http::status::see_other, "text/plain; charset=utf-8", std::string());
  res.set(http::field::location, to);
  if (!config.token.empty())
    res.set(http::field::set_cookie,
            "mira_token=" + percent_encode(*given, false) + "; Path=/; HttpOnly; SameSite=Strict");
  return res;
}

// What ends a request once its header has come, before its body is read: a framing RFC 9112
// 6.1 calls faulty, a request for another host name (a page whose name was rebound to this
// address) or a change from another site's page, and a route that needs the token without it
// (closed too, so connections without the token cannot hold the connection table).
std::optional<api_error> server::impl::refuse_before_body(const request& req) const {
  if (req.count(http::field::transfer_encoding) > 0 && (req.version() < 11 || !req.chunked()))
    return make_error(400, "bad_transfer_encoding",
                      "a Transfer-Encoding must end in chunked, on HTTP/1.1 (RFC 9112 6.1)");
  if (auto e = misdirected(req)) return e;
  if (config.token.empty() || token_given(req)) return std::nullopt;
  auto t = parse_target(req.target());
  if (!t) return std::nullopt;  // answered 400 with the target's error
  auto m = match_route(req.method_string(), t->path);
  if (!m || !m->spec->authenticated) return std::nullopt;
  return make_error(401, "unauthorized", "this route needs Authorization: Bearer <token>");
}

namespace {

// Completes when the client has closed its end (or the connection failed), setting `gone`;
// pipelined bytes are not a close, so then it waits until it is cancelled.
asio::awaitable<void> watch_for_close(tcp::socket& socket,
                                      std::shared_ptr<std::atomic<bool>> gone) {
  auto [ec] =
      co_await socket.async_wait(tcp::socket::wait_read, asio::as_tuple(asio::use_awaitable));
  if (ec == asio::error::operation_aborted) co_return;
  if (!ec) {
    char c = 0;
    boost::system::error_code peeked;
    auto n = socket.receive(asio::buffer(&c, 1), tcp::socket::message_peek, peeked);
    if (n > 0) {
      asio::steady_timer never(socket.get_executor(), asio::steady_timer::time_point::max());
      co_await never.async_wait(asio::as_tuple(asio::use_awaitable));
      co_return;
    }
  }
  *gone = true;
}

}  // namespace

asio::awaitable<bool> server::impl::handle(beast::tcp_stream& stream, request& req,
                                           std::uint64_t conn) {
  const bool keep = req.keep_alive();
  auto t = parse_target(req.target());
  if (!t) co_return co_await write(stream, conn, error_response(t.error()), keep);
  auto m = match_route(req.method_string(), t->path);
  if (!m) co_return co_await write(stream, conn, error_response(m.error()), keep);
  // A body is JSON, so a page on another site cannot send one without asking first (a no-cors
  // request may only be text/plain or a form).
  if (req.method() != http::verb::get && !req.body().empty() &&
      !is_json_media_type(req[http::field::content_type]))
    co_return co_await write(stream, conn,
                             error_response(body_not_json(req[http::field::content_type])), keep);
  if (config.read_only && req.method() == http::verb::post)
    co_return co_await write(
        stream, conn,
        error_response(
            make_error(403, "read_only", "this server shows saved runs only (mira view)")),
        keep);
  if (auto to = token_redirect(*m, *t))
    co_return co_await write(stream, conn, std::move(*to), keep);
  if (m->spec->r == route::run_events) {
    co_await events(stream, conn, req, *t, m->run_id);
    co_return false;
  }
  if (m->spec->r == route::run_report || m->spec->r == route::run_cases ||
      m->spec->r == route::run_case || m->spec->r == route::compare) {
    // A heavy read waits its turn on the workers: one whose client has left by then is skipped
    // (a client that asks for reports and hangs up cannot queue minutes of work).
    auto gone = std::make_shared<std::atomic<bool>>(false);
    auto answering = answer(*m, *t, req, gone);
    auto watching = watch_for_close(stream.socket(), gone);
    auto raced = co_await (std::move(answering) || std::move(watching));
    if (raced.index() == 1) co_return false;
    auto& res = std::get<0>(raced);
    if (!res) co_return co_await write(stream, conn, error_response(res.error()), keep);
    co_return co_await write(stream, conn, std::move(*res), keep);
  }
  // No ?: with temporaries here: g++ 12 evaluates both arms of one inside a coroutine.
  auto res = co_await answer(*m, *t, req);
  if (!res) co_return co_await write(stream, conn, error_response(res.error()), keep);
  co_return co_await write(stream, conn, std::move(*res), keep);
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
    case route::dashboard_case:
      return page(detail::case_page(m.run_id, m.key));
    case route::dashboard_compare:
      return page(detail::compare_page());
    case route::dashboard_compare_case:
      return page(detail::compare_case_page(m.key));
    case route::dashboard_script:
      return make_response(http::status::ok, "text/javascript; charset=utf-8",
                           std::string(detail::dashboard_script()));
    case route::viewer_script:
      return make_response(http::status::ok, "text/javascript; charset=utf-8",
                           std::string(detail::viewer_script()));
    default:
      break;
  }
  return tl::unexpected(make_error(404, "not_found", "no route for this path"));
}

asio::awaitable<tl::expected<response, api_error>> server::impl::answer(
    const route_match& m, const request_target& t, request& req,
    detail::run_manager::abandoned gone) {
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
      if (!wants_ndjson(t, req[http::field::accept])) {
        auto q = decode_case_query(t);
        if (!q) co_return tl::unexpected(q.error());
        co_return json_result(http::status::ok,
                              co_await runs.case_page(m.run_id, std::move(*q), gone));
      }
      auto text = co_await runs.cases(m.run_id, t.param("state"), gone);
      if (!text) co_return tl::unexpected(text.error());
      co_return make_response(http::status::ok, "application/x-ndjson", std::move(*text));
    }
    case route::run_case:
      co_return json_result(http::status::ok, co_await runs.one_case(m.run_id, m.key));
    case route::compare: {
      auto q = decode_compare_query(t);
      if (!q) co_return tl::unexpected(q.error());
      co_return json_result(http::status::ok, co_await runs.compare(std::move(*q), gone));
    }
    case route::run_report: {
      auto r = co_await runs.report(m.run_id, t.param("format").value_or("json"), gone);
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
        using outcome = idempotency_keys::outcome;
        if (seen.what == outcome::conflict)
          co_return tl::unexpected(
              make_error(409, "idempotency_conflict",
                         "this Idempotency-Key was used with another request body"));
        if (seen.what == outcome::in_progress)
          co_return tl::unexpected(
              make_error(409, "idempotency_in_progress",
                         "a request with this Idempotency-Key is still being answered; retry it"));
        if (seen.what == outcome::replay) co_return created(seen.run_id, true);
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

asio::awaitable<void> server::impl::events(beast::tcp_stream& stream, std::uint64_t conn,
                                           request& req, const request_target& t,
                                           const std::string& id) {
  auto self = shared_from_this();
  std::uint64_t last = 0;
  auto given = t.param("last_event_id");
  if (auto header = req["Last-Event-ID"]; !header.empty()) given = std::string(header);
  if (given) {
    auto n = parse_last_event_id(*given);
    if (!n) {
      co_await write(stream, conn,
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
  auto send_text = [&](std::string text) -> asio::awaitable<bool> {
    co_return co_await send(stream, conn, text);
  };
  // At most about a slice of frames at a time: a client far behind costs one slice, not the log.
  auto frames_after = [&](std::string& text) {
    for (auto& e : run->events.after(last)) {
      if (text.size() >= send_slice) break;
      text += sse_frame(e);
      last = e.id;
    }
  };
  if (!run) {
    // A saved run this server did not run: its end, once.
    auto s = co_await runs.status(id);
    if (!s) {
      co_await write(stream, conn, error_response(s.error()), false);
      co_return;
    }
    if (last < 1) head += saved_end_frame(*s);
    co_await send_text(std::move(head));
    co_return;
  }
  // The header and what has happened so far in one write: a client sees the run's state at once.
  frames_after(head);
  if (!co_await send_text(std::move(head))) co_return;
  asio::steady_timer keepalive(ex);
  for (;;) {
    std::string text;
    frames_after(text);
    if (!text.empty()) {
      if (!co_await send_text(std::move(text))) co_return;
      if (run->events.last_id() > last) continue;  // more than a slice was waiting
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
    if (woke.index() == 1 && !co_await send_text(": keepalive\n\n")) co_return;
  }
}

server::server(asio::any_io_executor ex, server_config config)
    : impl_(std::make_shared<impl>(std::move(ex), std::move(config))) {}

server::~server() {
  boost::system::error_code ec;
  impl_->acceptor.close(ec);
}

tl::expected<tcp::endpoint, error> server::start() {
  if (auto why = validate(impl_->config)) return tl::unexpected(std::move(*why));
  boost::system::error_code ec;
  std::filesystem::create_directories(impl_->config.results_dir, ec);
  if (ec)
    return tl::unexpected(error{errc::results_dir_unusable, "cannot create the results directory " +
                                                                impl_->config.results_dir.string() +
                                                                ": " + ec.message()});
  tcp::endpoint ep(asio::ip::make_address(impl_->config.address), impl_->config.port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    a.close();
    return tl::unexpected(
        error{ec == asio::error::address_in_use ? errc::address_in_use : errc::bind_failed,
              "cannot listen on " + impl_->config.address + ":" +
                  std::to_string(impl_->config.port) + ": " + ec.message()});
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
  // Nothing more is due to connections waiting for, reading or draining a request, nor to one
  // that does not read what it is sent.
  auto close_idle = [s, &ec] {
    for (auto& [id, c] : s->conns)
      if (c.interruptible || c.writing) c.stream->socket().close(ec);
  };
  close_idle();
  co_await s->runs.stop();
  // The others end after their answer (an event stream after its run's end, which has come
  // now), given stop_grace; then every connection still open is closed.
  close_idle();
  asio::steady_timer grace(s->ex, stop_grace);
  while (!s->conns.empty()) {
    auto t = s->conns_changed;
    auto woke = co_await (t->async_wait(asio::as_tuple(asio::use_awaitable)) ||
                          grace.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (woke.index() == 0) continue;
    for (auto& [id, c] : s->conns) c.stream->socket().close(ec);
    grace.expires_at(asio::steady_timer::time_point::max());
  }
}

}  // namespace mira::serve
