// The provider's coroutine shell (see provider.hpp): the cache, one HTTP exchange, and the
// wire forms of wire.hpp.
#include <mira/models/provider.hpp>
#include <mira/models/transcript.hpp>
#include <mira/protocol/codec.hpp>
#include <mira/study/error.hpp>

#include "models/wire.hpp"

#include <boost/asio/error.hpp>
#include <boost/json/serialize.hpp>
#include <boost/system/system_error.hpp>

#include <cstdlib>

namespace mira::models {

namespace detail {

struct provider_state {
  api kind;
  std::string model;
  std::optional<std::string> key;
  std::string base_url;
  price_table prices;
  std::chrono::milliseconds timeout;
  response_cache cache;
  std::optional<client> http;  // unset: default_client(), taken when a request is sent
  std::vector<http_header> headers;
  std::string anthropic_version;
};

}  // namespace detail

namespace {

using state = detail::provider_state;

std::optional<std::string> environment(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

std::string_view key_variable_of(api a) {
  return a == api::anthropic_messages ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
}

std::string default_base_url(api a) {
  if (a == api::anthropic_messages)
    return environment("ANTHROPIC_BASE_URL").value_or("https://api.anthropic.com");
  return environment("OPENAI_BASE_URL").value_or("https://api.openai.com/v1");
}

// What identifies a request to the cache: never the key, nor any header.
std::string cache_key(api a, std::string_view base_url, const json::object& body) {
  json::object key{{"api", name_of(a)}, {"base_url", base_url}, {"body", body}};
  return canonical_json(key);
}

boost::asio::awaitable<tl::expected<reply, error>> send_on(std::shared_ptr<const state> s,
                                                           request r) {
  auto body = detail::encode_request(s->kind, s->model, r);
  if (!body) co_return tl::make_unexpected(std::move(body.error()));
  std::string entry;  // the request's cache key
  if (s->cache.mode() != cache_mode::off) {
    entry = cache_key(s->kind, s->base_url, *body);
    if (auto hit = s->cache.find(entry)) {
      // An entry that no longer decodes (another version's) is a miss, as a torn one is.
      if (auto cached = detail::decode_reply(s->kind, *hit)) {
        cached->from_cache = true;
        detail::price_reply(*cached, s->prices, s->model);
        co_return cached;
      }
    }
  }
  if (!s->key)
    co_return tl::make_unexpected(detail::wire_error(
        errc::no_api_key, std::string(key_variable_of(s->kind)) + " is not set"));
  http_request q;
  q.url = detail::endpoint(s->kind, s->base_url);
  q.headers = detail::headers_for(s->kind, *s->key, s->anthropic_version);
  q.headers.insert(q.headers.end(), s->headers.begin(), s->headers.end());
  q.body = json::serialize(*body);
  q.timeout = s->timeout;
  // Each awaitable made in a statement of its own: g++ 12 may destroy the temporaries of a
  // co_await full-expression twice (docs/toolchain-notes.md).
  client http = s->http ? *s->http : default_client();
  auto exchange = http.request(std::move(q));
  auto answer = co_await std::move(exchange);
  if (!answer) co_return tl::make_unexpected(std::move(answer.error()));
  if (answer->status < 200 || answer->status > 299)
    co_return tl::make_unexpected(
        detail::failure_of(s->kind, *answer, *s->key, std::chrono::system_clock::now()));
  auto decoded = detail::decode_reply(s->kind, answer->body);
  if (!decoded) {
    decoded.error().http_status = answer->status;
    co_return decoded;
  }
  if (!entry.empty()) s->cache.store(entry, answer->body);
  detail::price_reply(*decoded, s->prices, s->model);
  co_return decoded;
}

boost::asio::awaitable<reply> complete_on(std::shared_ptr<const state> s, request r) {
  auto sending = send_on(std::move(s), std::move(r));
  auto answer = co_await std::move(sending);
  if (!answer) throw_error(answer.error());
  co_return std::move(*answer);
}

boost::asio::awaitable<protocol::transcript> answer_on(std::shared_ptr<const state> s,
                                                       const study::run_context& c) {
  const request asked = request_for(c.sample());
  auto completing = complete_on(std::move(s), asked);
  auto answer = co_await std::move(completing);
  protocol::transcript t;
  record(t, asked, answer);
  co_return t;
}

// One part of a sample's input: a part as the protocol writes it, or its JSON as text.
protocol::part part_of(const json::value& v) {
  if (auto* text = v.if_string()) {
    protocol::part p;
    p.kind = "text";
    p.text = std::string(*text);
    return p;
  }
  if (auto decoded = protocol::decode_part(v)) return std::move(*decoded);
  protocol::part p;
  p.kind = "text";
  p.text = json::serialize(v);
  return p;
}

// A message of the input ({"role", "content"}), its content a string or a list of parts.
message message_of(const json::object& o) {
  message m;
  m.role = detail::string_at(o, "role");
  if (auto* content = o.if_contains("content")) {
    if (auto* parts = content->if_array())
      for (const auto& p : *parts) m.content.push_back(part_of(p));
    else
      m.content.push_back(part_of(*content));
  }
  return m;
}

}  // namespace

client& default_client() {
  static client c;
  return c;
}

provider::provider(api kind, std::string model, provider_options options) {
  auto s = std::make_shared<state>(state{
      kind, std::move(model), std::nullopt, options.base_url.value_or(default_base_url(kind)),
      std::move(options.prices), options.timeout,
      options.cache ? std::move(*options.cache) : response_cache::from_environment(),
      std::move(options.http), std::move(options.headers), std::move(options.anthropic_version)});
  auto key = options.api_key ? options.api_key : environment(key_variable_of(kind).data());
  if (key && !blank(*key)) s->key = std::move(*key);
  state_ = std::move(s);
}

api provider::kind() const noexcept {
  return state_->kind;
}
const std::string& provider::model() const noexcept {
  return state_->model;
}
const std::string& provider::base_url() const noexcept {
  return state_->base_url;
}
bool provider::has_key() const noexcept {
  return state_->key.has_value();
}
std::string_view provider::key_variable() const noexcept {
  return key_variable_of(state_->kind);
}

boost::asio::awaitable<tl::expected<reply, error>> provider::send(request r) const {
  return send_on(state_, std::move(r));
}

boost::asio::awaitable<reply> provider::complete(request r) const {
  return complete_on(state_, std::move(r));
}

boost::asio::awaitable<reply> provider::complete(std::string prompt) const {
  return complete_on(state_, request::of(std::move(prompt)));
}

boost::asio::awaitable<protocol::transcript> provider::answer(const study::run_context& c) const {
  return answer_on(state_, c);
}

provider openai_chat(std::string model, provider_options options) {
  return {api::openai_chat, std::move(model), std::move(options)};
}

provider openai_responses(std::string model, provider_options options) {
  return {api::openai_responses, std::move(model), std::move(options)};
}

provider anthropic(std::string model, provider_options options) {
  return {api::anthropic_messages, std::move(model), std::move(options)};
}

request request_for(const study::sample& s) {
  request r;
  message user;
  for (const auto& turn : s.input) {
    const auto* o = turn.if_object();
    if (o && o->contains("role")) {
      if (!user.content.empty()) r.messages.push_back(std::exchange(user, message{}));
      r.messages.push_back(message_of(*o));
    } else {
      user.content.push_back(part_of(turn));
    }
  }
  if (!user.content.empty()) r.messages.push_back(std::move(user));
  return r;
}

void throw_error(const error& e) {
  if (e.code == errc::cancelled)
    throw boost::system::system_error(boost::asio::error::operation_aborted);
  if (is_transient(e.code)) throw study::infra_error(e.message, e.retry_after);
  throw study::request_error(study::errc::subject_failed, e.message);
}

}  // namespace mira::models
