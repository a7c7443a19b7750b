// The plain parts of an external agent's case (see agent.hpp), apart from the process: the
// placeholder expansion, the capture of what the agent wrote, and the reading
// of its events stream or trajectory into a transcript. Tests drive them directly.
#pragma once

#include <mira/protocol/types.hpp>
#include <mira/study/agent.hpp>

#include <tl/expected.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mira::study::detail {

/// An SDK-side failure of an agent's case: its code and a message for people.
struct agent_error {
  boost::system::error_code code;
  std::string message;
};

/// Placeholder names (without the braces) and what they stand for.
using placeholders = std::vector<std::pair<std::string_view, std::string>>;

/// `text` with each {name} of `values` replaced, in one pass: what a value brings in is not
/// expanded again, and an unknown {name} stays as it is.
std::string expand(std::string_view text, const placeholders& values);

/// Whether a '/'-separated relative path matches a glob: '*' and '?' within a segment, "**" a
/// whole segment standing for any number of them (none included), any other byte itself.
bool glob_match(std::string_view pattern, std::string_view path);

/// What was captured: path -> contents, and path -> why a matching file was left out.
struct captured {
  json::object files;
  json::object skipped;
};

/// The regular files under `root` (symbolic links neither followed nor read) that match one of
/// `patterns`, in path order, within `limits`.
captured capture(const std::filesystem::path& root, const std::vector<std::string>& patterns,
                 const capture_limits& limits);

/// Whether `s` is well-formed UTF-8.
bool valid_utf8(std::string_view s);
/// `s` with each byte that is not part of well-formed UTF-8 replaced by U+FFFD.
std::string to_valid_utf8(std::string_view s);

/// The file's bytes, unless it is missing (no_transcript) or larger than `max`
/// (transcript_too_large); `what` names it in the message.
tl::expected<std::string, agent_error> read_bounded(const std::filesystem::path& file,
                                                    std::size_t max, std::string_view what);

/// Reads an events stream (docs/study-agents.md has the line shape) into `t`: each line's object
/// into t.events, the steps it describes into t.trajectory (named `agent_name`) and the flat
/// fields, an "error" line into t.error. A line that is not a JSON object with a string "kind",
/// or whose known kind has a member of the wrong type, is a malformed_events error naming it.
std::optional<agent_error> read_events(std::string_view text, std::string_view agent_name,
                                       protocol::transcript& t);

/// Reads an ATIF document into t.trajectory and projects it; one that is not JSON or that
/// protocol::project refuses is a malformed_trajectory error saying why.
std::optional<agent_error> read_trajectory(std::string_view text, protocol::transcript& t);

}  // namespace mira::study::detail
