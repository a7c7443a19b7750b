// ATIF trajectory projection: the flat transcript fields (final_response, tool_calls,
// tool_calls_count, iterations, usage) derived from transcript.trajectory, as the spec defines.
#pragma once

#include <mira/protocol/codec.hpp>

namespace mira::protocol {

struct trajectory_projection {
  std::string final_response;
  std::vector<std::string> tool_calls;
  std::int64_t iterations = 0;
  protocol::usage usage;
};

/// Projects an ATIF document. Accepts any "ATIF-v1" / "ATIF-v1.x" schema_version and rejects
/// every other one (and malformed steps) with an error, never a crash.
decoded<trajectory_projection> project(const json::value& trajectory);

/// If `transcript` carries a non-null trajectory, fills each flat field the producer left absent
/// or default from its projection, never overwriting one the producer set.
std::optional<decode_error> project_trajectory(json::object& transcript);
/// The same on a typed transcript: where the one above finds a field absent or default, this
/// one finds its member at its default (empty, 0, usage.is_default()). A study calls it on the
/// transcripts it produces; decode_transcript calls it on the ones it receives.
std::optional<decode_error> project_trajectory(transcript& t);

/// An ATIF-v1.7 document built from a transcript summary, for a case whose study sent no
/// trajectory: one agent step per tool call (id "call-N", empty arguments), then a final agent
/// step with the final response; final_metrics carry the usage and the step count.
json::object synthesize_trajectory(const transcript_summary& t, std::string_view agent_name,
                                   std::string_view agent_version);

}  // namespace mira::protocol
