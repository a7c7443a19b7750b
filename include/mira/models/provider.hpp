// A model behind one of the provider APIs, for subjects (the model under test) and judges: a
// request in, a reply out, through the response cache when one is set, with the errors a study
// answers with (a rate limit or an outage is the case's infra error, which the host retries;
// a refused request is the subject's error, saying what the provider said).
//
//   auto model = mira::models::openai_chat("gpt-4o-mini");
//   auto reply = co_await model.complete("What is the capital of France?");
#pragma once

#include <mira/models/cache.hpp>
#include <mira/models/chat.hpp>
#include <mira/models/error.hpp>
#include <mira/models/http.hpp>
#include <mira/study/context.hpp>

#include <boost/asio/awaitable.hpp>
#include <tl/expected.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::models {

namespace detail {
struct provider_state;
}  // namespace detail

/// How a provider reaches its model. Every member may be left as it is.
struct provider_options {
  /// The key; unset: OPENAI_API_KEY (the OpenAI APIs) or ANTHROPIC_API_KEY, read when the
  /// provider is made. A key of only white space is no key.
  std::optional<std::string> api_key{};
  /// The base URL; unset: OPENAI_BASE_URL, ending in /v1 (default https://api.openai.com/v1),
  /// or ANTHROPIC_BASE_URL, without it (default https://api.anthropic.com), as the official
  /// SDKs read them. An OpenAI-compatible server: its URL ending in /v1.
  std::optional<std::string> base_url{};
  /// Prices by model: a reply of a model named here has its usage.cost_usd set.
  price_table prices{};
  /// The whole exchange of one request (connecting, sending, reading the answer).
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
  /// The response cache; unset: response_cache::from_environment() (MIRA_CACHE_DIR).
  std::optional<response_cache> cache{};
  /// The HTTP client; unset: default_client().
  std::optional<client> http{};
  /// Headers added to every request (OpenAI-Organization, a gateway's own); mark keys secret.
  std::vector<http_header> headers{};
  /// Anthropic's API version header.
  std::string anthropic_version = "2023-06-01";
};

/// The client providers share when given none: made on first use, with the environment's
/// proxies and certificates (client_options' defaults).
client& default_client();

/// One model of one provider API. A handle: copies share their settings, and a copy may be
/// used from any thread.
///
/// The coroutines run on the caller's executor and honour its cancellation slot (a case's
/// cancel closes its request at once, see client::request). Each takes what it needs by value:
/// a temporary provider may be awaited, `co_await openai_chat("m").complete("hi")`.
class provider {
 public:
  /// Reads the key, the base URL and, unless `options` sets one, the cache's environment now.
  /// Throws std::invalid_argument for a bad MIRA_CACHE_MODE.
  provider(api kind, std::string model, provider_options options = {});

  api kind() const noexcept;
  const std::string& model() const noexcept;
  const std::string& base_url() const noexcept;
  /// Whether a key is set: without one, only the cache answers.
  bool has_key() const noexcept;
  /// Where the key is read from: "OPENAI_API_KEY" or "ANTHROPIC_API_KEY".
  std::string_view key_variable() const noexcept;

  /// The model's reply to `r`, or why there is none: errc::no_api_key (no key, and no cache
  /// entry), a transport error of the client, rate_limited / server_error / client_error (the
  /// provider's status, its message quoted), bad_request (content the API cannot carry),
  /// bad_provider_response (a 2xx that is not a reply). Never throws but for allocation.
  ///
  /// With a cache that reads, an entry for the same request (API, base URL, model, messages,
  /// parameters; not the key) answers instead, its reply marked from_cache; with one that
  /// writes, each successful answer is stored.
  boost::asio::awaitable<tl::expected<reply, error>> send(request r) const;

  /// The reply to `r`, for a subject: a failure is thrown as throw_error() says.
  boost::asio::awaitable<reply> complete(request r) const;
  /// The reply to one user message.
  boost::asio::awaitable<reply> complete(std::string prompt) const;

  /// The case's sample asked (request_for), its reply recorded in a new transcript (record()):
  /// a whole subject, `.subject([](study::run_context& c) { return model.answer(c); })`.
  /// `c` must outlive the awaitable (the subject's context does).
  boost::asio::awaitable<protocol::transcript> answer(const study::run_context& c) const;

 private:
  std::shared_ptr<const detail::provider_state> state_;
};

/// A provider of OpenAI Chat Completions (and of any OpenAI-compatible server).
provider openai_chat(std::string model, provider_options options = {});
/// A provider of OpenAI Responses.
provider openai_responses(std::string model, provider_options options = {});
/// A provider of Anthropic Messages.
provider anthropic(std::string model, provider_options options = {});

/// A sample's input as a request: its strings and parts (protocol::part's JSON form) one user
/// message, in order; an element with a `role` (and `content`, a string or a list of parts) a
/// message of its own; anything else as its JSON text.
request request_for(const study::sample& s);

/// Throws what a study answers `e` with: boost::system::system_error(operation_aborted) for
/// errc::cancelled (the case's cancel); study::infra_error with the message and the
/// Retry-After for a transient error (is_transient: a rate limit, a 5xx, a network failure,
/// a timeout), so the host retries the case; study::request_error (subject_failed, not
/// retryable) for the rest, with the message.
[[noreturn]] void throw_error(const error& e);

}  // namespace mira::models
