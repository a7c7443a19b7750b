// A model's replies in a case's transcript: each an ATIF agent step (its message, reasoning,
// tool calls and metrics) after the messages that asked for it, its usage added to the
// transcript's, and a reply from the response cache counted in metadata.cache_hits.
#pragma once

#include <mira/models/chat.hpp>
#include <mira/protocol/types.hpp>

namespace mira::models {

/// Records `asked` and its reply `r` in `t`.
///
/// The trajectory (t.trajectory, ATIF-v1.7, made at the first call) gains the messages of
/// `asked` not yet recorded: all of them at the first call (the system prompt as a system step,
/// a user message as a user step, an assistant message given as history as a copied agent
/// step), after that those after its last assistant message (the turns since the previous
/// reply). A tool message is the observation of the step whose call it answers (else of the
/// last agent step). Then `r` as an agent step: its text, reasoning_content, tool_calls,
/// model_name, metrics (tokens, cached tokens, cost, reasoning tokens in extra), and in extra
/// its finish_reason and `"from_cache": true` when the cache answered. final_metrics keep the
/// totals.
///
/// The flat fields follow: final_response is r.text, r's tool calls are added to tool_calls
/// (and tool_calls_count), iterations grows by one, r.usage is added to t.usage, and a reply
/// from the cache adds one to metadata.cache_hits.
void record(protocol::transcript& t, const request& asked, const reply& r);

/// Records `r` alone, as record(t, request{}, r).
void record(protocol::transcript& t, const reply& r);

}  // namespace mira::models
