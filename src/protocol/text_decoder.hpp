// The text decoder's entry points for the host's hot path, private to the library: a `run` or
// `score` result decoded straight from its JSON text into the value handed to the caller
// (codec.hpp's decode_run_result_text is the public form). Bodies in text_decoder.cpp.
#pragma once

#include <mira/protocol/codec.hpp>

#include <optional>
#include <string_view>

namespace mira::protocol {

namespace detail {
/// decode_run_result_text into `out` (default-constructed): the host decodes into the value it
/// hands to the caller.
std::optional<decode_error> decode_run_result_text_into(std::string_view text, run_result& out);
/// The text decoder alone, without the DOM decoder behind it. True: `text` was one valid JSON
/// value (the decoder checks it as scan_json_value does, as it reads) and `out` holds what
/// decode_run_result_text gives. False says nothing of the text and leaves `out`
/// default-constructed: the host's hot path, which then checks the line as it checks any other.
bool read_run_result_text(std::string_view text, run_result& out);
}  // namespace detail

}  // namespace mira::protocol
