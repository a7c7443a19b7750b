// The provider APIs' wire forms, without I/O: a request as each API's JSON body, its answer as a
// reply, a failed status as an error. The provider's coroutine only sends what these make.
#pragma once

#include <mira/models/chat.hpp>
#include <mira/models/error.hpp>
#include <mira/models/http.hpp>

#include <tl/expected.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace mira::models::detail {

/// The request body for `a`, the model named in it; errc::bad_request for content the API
/// cannot carry (an audio part for Anthropic), saying which.
tl::expected<json::object, error> encode_request(api a, std::string_view model, const request& r);
/// A 2xx body as a reply; errc::bad_provider_response when it is not JSON or not the API's
/// shape, saying what is missing.
tl::expected<reply, error> decode_reply(api a, std::string_view body);
/// A response that is not a 2xx as an error: 429 rate_limited and 5xx (529 too) server_error
/// with the Retry-After (or retry-after-ms) asked for, 408 timed_out, another 4xx client_error.
/// The message names the API and the status and quotes the provider's own message (its
/// error.message), with every occurrence of `key` masked.
error failure_of(api a, const http_response& r, std::string_view key,
                 std::chrono::system_clock::time_point now);

/// Where a request of `a` goes, from a base URL (OPENAI_BASE_URL's, ending in /v1, or
/// ANTHROPIC_BASE_URL's, without it); a trailing slash of the base is dropped.
std::string endpoint(api a, std::string_view base_url);
/// The headers a request of `a` carries: its key (a secret header) and the API's own.
std::vector<http_header> headers_for(api a, std::string_view key,
                                     std::string_view anthropic_version);
/// Sets r.usage.cost_usd from `prices` (the requested model's, else the reply's), when it names
/// one.
void price_reply(reply& r, const price_table& prices, std::string_view requested_model);

// --- shared by the three APIs' codecs ----------------------------------------------------------

/// A media part's URL: its uri, or a data: URI of its base64 data.
std::string media_url(const protocol::part& p);
/// A media part's base64 bytes: its data, or those of a data: URI; nullopt for a URL.
std::optional<std::string> base64_of(const protocol::part& p);
/// A part that is neither text nor media (a json part) as text.
std::string part_text(const protocol::part& p);
/// The members of `extra` set on `body`, replacing those of the same name.
void merge_extra(json::object& body, const json::object& extra);
/// The arguments a model wrote as text: parsed when they are JSON, else the text.
json::value parse_arguments(std::string_view text);
/// Arguments as the text the OpenAI APIs carry.
std::string arguments_text(const json::value& arguments);
/// An error of code `e` with this message.
error wire_error(errc e, std::string message);
/// The string at `key` of an object (value), or empty.
std::string_view string_at(const json::value* v, std::string_view key);
std::string_view string_at(const json::object& o, std::string_view key);
/// The integer at `key` of an object value, or 0.
std::int64_t int_at(const json::value* v, std::string_view key);

tl::expected<json::object, error> encode_chat(std::string_view model, const request& r);
tl::expected<json::object, error> encode_responses(std::string_view model, const request& r);
tl::expected<json::object, error> encode_anthropic(std::string_view model, const request& r);
tl::expected<reply, error> decode_chat(const json::object& body);
tl::expected<reply, error> decode_responses(const json::object& body);
tl::expected<reply, error> decode_anthropic(const json::object& body);

}  // namespace mira::models::detail
