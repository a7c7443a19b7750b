// JSON mapping of the wire types: one table of fields per type (src/protocol/fields.hpp) drives
// both the DOM decoder and the text decoder. Decoding follows the spec's forward-compatibility
// rules: unknown fields are ignored (and kept in `raw` where the type has one), missing fields take
// their defaults, integers are accepted where a number is expected, and `trials` 0 or absent
// means 1. A wrong type is an error naming the offending field path, e.g.
// `evals[2].targets[0].label`. Encoding omits defaulted optional fields, as the spec's examples do.
#pragma once

#include <mira/protocol/types.hpp>

#include <tl/expected.hpp>

#include <string>

namespace mira::protocol {

struct decode_error {
  std::string path;  // JSON path of the offending field; empty for the root
  std::string what;  // e.g. "expected a string, got number"

  std::string message() const;  // "path: what"
};

template <class T>
using decoded = tl::expected<T, decode_error>;

decoded<rpc_error> decode_rpc_error(const json::value& v);
decoded<initialize_result> decode_initialize_result(const json::value& v);
decoded<list_result> decode_list_result(const json::value& v);
decoded<list_samples_result> decode_list_samples_result(const json::value& v);
/// The same from the result's JSON text, read like decode_run_result_text: a study's listing
/// (its samples may be hundreds of thousands) without a DOM.
decoded<list_result> decode_list_result_text(std::string_view text);
decoded<list_samples_result> decode_list_samples_result_text(std::string_view text);
/// `raw_json` is the result's text as received, when the caller has it; otherwise the value is
/// serialized. Values are copied out of `v`: it may live in a parser's arena.
decoded<run_result> decode_run_result(const json::value& v, std::string raw_json = {});
/// The same from the result's JSON text: the common shapes are read in one pass straight into
/// the typed view (doubles correctly rounded, by std::from_chars), anything else through the
/// DOM decoder above. Text that is not JSON is an error.
decoded<run_result> decode_run_result_text(std::string_view text);
decoded<execute_result> decode_execute_result(const json::value& v, std::string raw_json = {});
decoded<cancel_result> decode_cancel_result(const json::value& v);
decoded<event_params> decode_event_params(const json::value& v);
decoded<log_params> decode_log_params(const json::value& v);
decoded<part> decode_part(const json::value& v);
decoded<run_params> decode_run_params(const json::value& v);

// What a study reads: the params of the host's requests (`v` is the request's params; a request
// without params is read as an empty object). Errors name the field from the params' root, e.g.
// `trial`, `transcript`. The members the schema requires and that have no meaningful default are
// required: list_samples' eval and cursor, cancel's id and score's transcript.

/// A member the host leaves out is empty here, not this library's host's own values.
decoded<initialize_params> decode_initialize_params(const json::value& v);
decoded<list_samples_params> decode_list_samples_params(const json::value& v);
decoded<cancel_params> decode_cancel_params(const json::value& v);
/// The case identity (read as decode_run_params reads it) and the transcript, kept as the JSON
/// object received (copied out of `v`); decode_transcript gives its typed view.
decoded<score_params> decode_score_params(const json::value& v);
/// The full transcript (summary fields, trajectory, events, files). When it carries a trajectory,
/// the flat fields the producer left absent or default are filled from the trajectory's
/// projection (trajectory.hpp's project_trajectory); a trajectory that cannot be read is an error
/// under `trajectory`. Paths are from the transcript's root: `usage.input_tokens`.
decoded<transcript> decode_transcript(const json::value& v);

json::object encode(const initialize_params& p);
json::object encode(const list_samples_params& p);
json::object encode(const run_params& p);
json::object encode(const score_params& p);
json::object encode(const cancel_params& p);
json::object encode(const rpc_error& e);
json::object encode(const sample_info& s);
json::object encode(const eval_info& e);
json::object encode(const list_result& l);

/// Appends the JSON text of `p` (as encode(p) would serialize it) without building a DOM:
/// the hot path of every `run` request.
void append_json(std::string& out, const run_params& p);
/// Appends `s` as a JSON string literal with the minimal escapes of RFC 8785: `"`, `\`, the
/// short forms `\b` `\f` `\n` `\r` `\t`, other control characters as `\u00xx`, everything else
/// as is.
void append_json_string(std::string& out, std::string_view s);

/// Major version of "MAJOR.MINOR"; nullopt when it is not a number.
std::optional<unsigned> version_major(std::string_view version);

}  // namespace mira::protocol
