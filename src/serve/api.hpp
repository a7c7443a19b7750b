// The HTTP API of `mira serve` without any I/O: the route table (which also writes the OpenAPI
// document), request-target decoding, the one error shape, request body decoding, run id and
// bearer checks, Idempotency-Key bookkeeping and the per-run event log behind Server-Sent
// Events. The server (server.cpp) only moves bytes through these; tests and the fuzzer drive
// them directly. Private to the library: not installed, reached by tests through mira_internal.
#pragma once

#include <mira/plan/plan.hpp>
#include <mira/schedule/run_plan.hpp>
#include <mira/serve/server.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <tl/expected.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mira::serve {

/// The API's own version (the `/v1` contract), independent of the host's and the protocol's.
inline constexpr std::string_view api_version = "1.0.0";

/// Every failure: `{"error": {"code", "message", "details"}}` with `status`; 429 and 503 carry
/// Retry-After (seconds).
struct api_error {
  unsigned status = 500;
  std::string code;
  std::string message;
  boost::json::value details;
  std::optional<unsigned> retry_after;
};
api_error make_error(unsigned status, std::string code, std::string message,
                     boost::json::value details = nullptr);
/// The error's JSON body.
std::string error_body(const api_error& e);

enum class route {
  healthz,
  version,
  openapi,
  studies,
  catalog,
  runs_create,
  runs_list,
  run_get,
  run_cases,
  run_case,
  run_report,
  run_cancel,
  run_resume,
  run_events,
  compare,
  dashboard,
  dashboard_run,
  dashboard_case,
  dashboard_compare,
  dashboard_compare_case,
  dashboard_script,
  viewer_script,
};

/// One row of the route table: what matches it, whether it needs the bearer token, and what
/// the OpenAPI document says of it.
struct route_spec {
  route r;
  std::string_view method;    // "GET" or "POST"
  std::string_view path;      // "/v1/runs/{id}/events"; {name} and {id} match one segment,
                              // {key} (last) the rest of the path, slashes and all
  bool authenticated;         // false: served without a token (health, the dashboard's shell)
  std::string_view summary;   // OpenAPI summary
  std::string_view produces;  // the success content type
  std::string_view statuses;  // the error statuses it can answer, space-separated
};
std::span<const route_spec> routes();

/// A request target split and percent-decoded: the path and its query parameters in order.
struct request_target {
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  /// The first value of `name`, if present.
  std::optional<std::string> param(std::string_view name) const;
};
/// Fails (400) on a target that is not origin-form, a bad percent escape, a NUL, or a path
/// segment "." or "..".
tl::expected<request_target, api_error> parse_target(std::string_view target);

struct route_match {
  const route_spec* spec = nullptr;
  std::string study;   // {name}
  std::string run_id;  // {id}, already checked by check_run_id
  std::string key;     // {key}: a case key, percent-decoded (its "/" sent as %2F or as is)
};
/// The route for `method` and `path`: 404 when no path matches, 405 when the path matches with
/// another method, 400 when a run id fails check_run_id (before anything touches a file).
tl::expected<route_match, api_error> match_route(std::string_view method, std::string_view path);

/// Whether an Authorization header value is "Bearer <token>" for `token`, compared in constant
/// time over the token's length (the header's length only shortens a mismatch).
bool bearer_matches(std::string_view authorization, std::string_view token);
/// `text` percent-encoded for a URL: unreserved characters (and '/' when `keep_slash`) as they
/// are, every other byte as %XX.
std::string percent_encode(std::string_view text, bool keep_slash);

/// Whether a Cookie header value holds `mira_token=<token>` (percent-encoded), compared as
/// bearer_matches compares. The dashboard sets it (SameSite=Strict) so that a link it shows,
/// such as a run's HTML report, can be opened with a token; the server takes it on GET only.
bool cookie_token_matches(std::string_view cookie, std::string_view token);

/// Whether a Host header value ("name", "name:port", "[v6]" or "[v6]:port") names this server,
/// so a page whose DNS name was rebound to this address is refused: a loopback name
/// (localhost, any 127.x.x.x literal, [::1]), the literal `listen_address` (unless it is the
/// unspecified address), or a name in `allowed`, compared without case, on any port.
bool host_allowed(std::string_view host, std::string_view listen_address,
                  std::span<const std::string> allowed);

/// Whether a state-changing request's Origin ("scheme://host[:port]") is this server's own:
/// http or https with the same authority as the request's `host`, or a host named in
/// `allowed`. "null", a page on another port of this machine, and anything else are foreign.
bool origin_allowed(std::string_view origin, std::string_view host,
                    std::span<const std::string> allowed);

/// Whether a Content-Type value is the media type `type` ("text/html"), compared without case,
/// parameters such as charset aside.
bool has_media_type(std::string_view content_type, std::string_view type);
/// has_media_type(content_type, "application/json").
bool is_json_media_type(std::string_view content_type);
/// The 415 for a request body that is not application/json, naming the `content_type` given.
api_error body_not_json(std::string_view content_type);

/// What POST /v1/runs asks for.
struct run_options {
  std::optional<std::size_t> concurrency;
  std::optional<int> retries;
  std::optional<double> case_timeout_s;
  std::optional<double> deadline_s;
  bool fail_fast = false;
  bool timeout_is_infra = false;
  std::optional<double> max_cost_usd;
  std::optional<std::int64_t> max_tokens;
  std::optional<std::size_t> procs;  // > 1: a pool of study processes
};
struct run_request {
  std::string study;
  plan::selection selection;
  run_options options;
  boost::json::object body;  // the request as decoded, kept in the run's meta.json
};
/// 415 unless the content type is application/json; 400 when the body is not a JSON object;
/// 422 naming the member when a member is unknown, of the wrong type or out of range.
tl::expected<run_request, api_error> decode_run_request(std::string_view content_type,
                                                        std::string_view body);
/// The run policy of those options (library defaults for what is not given).
schedule::run_policy to_policy(const run_options& o);

/// POST /v1/runs/{id}/resume: an empty body, or {"retry_errors": bool, "retry_failed": bool}.
struct resume_request {
  bool retry_errors = false;
  bool retry_failed = false;
};
tl::expected<resume_request, api_error> decode_resume_request(std::string_view content_type,
                                                              std::string_view body);

/// Idempotency-Key bookkeeping for POST /v1/runs: a key names one request body (by digest) and,
/// once made, its run. A key may be up to 256 characters of [A-Za-z0-9._:/-].
class idempotency_keys {
 public:
  enum class outcome { fresh, replay, conflict, in_progress };
  struct lookup_result {
    outcome what;
    std::string run_id;  // replay: the run made for the key
  };
  static bool valid_key(std::string_view key);
  /// fresh: the key is reserved for this body (call complete() or release() next).
  lookup_result begin(const std::string& key, std::string_view body);
  void complete(const std::string& key, std::string run_id);
  /// The request failed: the key may be used again.
  void release(const std::string& key);

 private:
  struct entry {
    std::string digest;
    std::string run_id;  // empty while the request is under way
  };
  std::map<std::string, entry> keys_;
};

/// One event of a run's stream. Ids count from 1 in the order the events happened.
struct run_event {
  std::uint64_t id = 0;
  std::string type;  // "start", "case", "progress", "end"
  std::string data;  // one line of JSON
};
/// The event in text/event-stream framing.
std::string sse_frame(const run_event& e);
/// A Last-Event-ID value: a decimal id, or nothing when it is not one.
std::optional<std::uint64_t> parse_last_event_id(std::string_view v);

/// A run's events, kept while it goes so a client can resume from any id.
class event_log {
 public:
  const run_event& append(std::string type, std::string data);
  /// The events after `id` (all of them for 0).
  std::span<const run_event> after(std::uint64_t id) const;
  std::uint64_t last_id() const { return events_.empty() ? 0 : events_.back().id; }
  /// Keeps the first event and the newest `keep - 1` (ids unchanged): a client resuming from a
  /// forgotten id gets what is left.
  void trim(std::size_t keep);

 private:
  std::vector<run_event> events_;
};

/// The OpenAPI 3.0 document of every route in routes().
std::string openapi_document();

}  // namespace mira::serve
