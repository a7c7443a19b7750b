// JSON mapping of the wire types: one table of fields per type (src/protocol/fields.hpp) drives
// the DOM decoder, the text decoder and the text writer. Decoding follows the spec's
// forward-compatibility rules: unknown fields are ignored (and kept in `raw` where the type has
// one), missing fields take their defaults, integers are accepted where a number is expected, and
// `trials` 0 or absent means 1. A wrong type is an error naming the offending field path, e.g.
// `evals[2].targets[0].label`. Encoding omits defaulted optional fields, as the spec's examples do.
//
// The host decodes results and notifications and encodes params; a study (mira::study) does the
// reverse, with the params decoders and the text writers below.
#pragma once

#include <mira/protocol/types.hpp>

#include <tl/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>

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
/// The same from the params' JSON text, read in one pass without a DOM where the text reader
/// takes it (a study's hot path), through the DOM decoder otherwise. Text that is not JSON is an
/// error.
decoded<run_params> decode_run_params_text(std::string_view text);

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

// The text writers: a value's JSON text appended to `out` without building a DOM, members in the
// order the decoders read them fastest, defaulted optional members left out as encode() leaves
// them, doubles in the shortest form that reads back the same (append_json_number). The host
// writes its `run` requests with them; a study writes every answer and notification with them,
// its hot path. A result's `raw`/`raw_json` copy of what a host received is never written: what
// is written is the typed view. A lazy_json member is written as its text(), unchecked.

/// The params of `run` and `execute` (as encode(p) would serialize them).
void append_json(std::string& out, const run_params& p);
/// A RunResult: the case identity (params, trial, trials and seed only when not defaulted),
/// input (when not empty), expected (when set), passed, aggregate, scores (`na` only when
/// true), the transcript summary and skipped.
void append_json(std::string& out, const run_result& r);
/// An ExecuteResult: the case identity, the full transcript and skipped.
void append_json(std::string& out, const execute_result& r);
/// A TranscriptSummary: final_response, iterations, tool_calls_count and usage always (usage's
/// cache_read_tokens and reasoning_tokens when not 0); tool_calls, timing (each member when
/// set), metrics, metadata and output when not empty; error when set; error_kind when "infra".
void append_json(std::string& out, const transcript_summary& t);
/// A full Transcript: the summary's members, then trajectory (when set), events and files. The
/// flat fields are written as they are: project_trajectory(transcript&) fills them first.
void append_json(std::string& out, const transcript& t);
/// An InitializeResult: protocol_version, study and evals always; study_version, capabilities
/// and capability_params when not empty.
void append_json(std::string& out, const initialize_result& r);
/// A ListSamplesResult: samples (each as encode(sample_info)), next_cursor when set.
void append_json(std::string& out, const list_samples_result& r);
/// One EvalInfo and a whole ListResult, the same values encode() makes (a target's members in
/// the field table's order): a listing of many samples written without a DOM of it.
void append_json(std::string& out, const eval_info& e);
void append_json(std::string& out, const list_result& l);
/// EventParams: request_id, eval, sample, target and kind always; params when not empty; turn,
/// tool and text when set.
void append_json(std::string& out, const event_params& e);
/// LogParams: request_id and message.
void append_json(std::string& out, const log_params& l);
/// An error object, as encode(e): code when not 0, message, retryable when true, data when set.
void append_json(std::string& out, const rpc_error& e);
void append_json(std::string& out, const cancel_result& r);

// Whole NDJSON lines (the frames of the spec's envelopes), newline included, for a study's
// writer. The JSON text handed in is copied unchecked: it must be one JSON value with no raw
// newline, as the writers above make it.

/// `{"id":ID,"result":RESULT}` and a newline: the answer to request `id`.
void append_result_frame(std::string& out, std::int64_t id, std::string_view result_json);
/// `{"id":ID,"error":{...}}` and a newline: request `id` failed.
void append_error_frame(std::string& out, std::int64_t id, const rpc_error& e);
/// `{"method":METHOD,"params":PARAMS}` and a newline: a notification (`event`, `log`).
void append_notification_frame(std::string& out, std::string_view method,
                               std::string_view params_json);
/// Appends `s` as a JSON string literal with the minimal escapes of RFC 8785: `"`, `\`, the
/// short forms `\b` `\f` `\n` `\r` `\t`, other control characters as `\u00xx`, everything else
/// as is.
void append_json_string(std::string& out, std::string_view s);

/// Major version of "MAJOR.MINOR"; nullopt when it is not a number.
std::optional<unsigned> version_major(std::string_view version);

}  // namespace mira::protocol
