// A saved case: the study's RunResult (unknown fields kept) plus the host's fields (key, status,
// attempts, retried, latency_ms). The one format of result.json, segment records, jsonl reports
// and served cases, with its codec, so every reader agrees with every writer.
#pragma once

#include <mira/plan/plan.hpp>
#include <mira/schedule/results.hpp>

#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace mira::store {

/// The record's result (the study's JSON text) as an object; empty without one.
boost::json::object result_object(const schedule::case_record& r);

/// The saved record of one case as JSON text on one line, without the '\n': the study's result
/// (unknown fields kept) or, for a case that never produced one, a synthesised result with the
/// error, then the host's members `key`, `status`, `attempts`, and `retried`, `host_message`,
/// `latency_ms` when they apply (a result's own member of one of those names keeps its place
/// and takes the host's value). Written straight from the record: the result's text is
/// rewritten in the host's form as it is copied (protocol::to_json_text's form), not parsed.
std::string case_line(const plan::planned_case& c, const schedule::case_record& r);
/// case_line() appended to `out` (a writer's batch, a report being streamed).
void append_case_line(std::string& out, const plan::planned_case& c,
                      const schedule::case_record& r);
/// The same for case `i` of `cases`, whose key (cases.key(i)) the caller has at hand: the line
/// of a case run from a compact plan without making the whole planned case.
void append_case_line(std::string& out, const plan::case_list& cases, std::size_t i,
                      std::string_view key, const schedule::case_record& r);

/// The case key of a saved record: its "key", or for a record the Rust mira CLI saved (a bare
/// RunResult) the key computed from its identity, as both hosts compute it. Nothing when it has
/// neither.
std::optional<std::string> key_of(const boost::json::object& record);

/// The case record of a saved record (case_line()'s text, parsed), read in one pass over its
/// members: the host's fields, and the study's result as the text of the other members. A
/// record the Rust mira CLI saved (a bare RunResult, no "status") takes its state from the
/// verdict. A result is put back only for a case that produced one (passed, failed, N/A, or
/// skipped by the study) and only when it decodes as a RunResult.
schedule::case_record decode_case_record(const boost::json::object& saved);

}  // namespace mira::store
