// plan-keys.ndjson: the keys of the plan of a run's last session, so that a reader can name the
// planned cases a run has no record of (meta.json only counts them). Its codec, its writer
// (begin_session) and its reader (run_reader, merge_runs), private to the store:
//
//   {"plan_keys":1,"session":2,"started":"2026-12-07T00:15:02Z"}
//   "echo/s0@sim"
//   "echo/s1@sim"
//   {"keys":2,"crc32c":"1c2d3e4f"}
//
// The first line names the session (its number and start, as in meta.json): the keys of an
// earlier session (a later one could not write its own, or was run by a host that writes none)
// are never taken for the last one's. A key a line, as a JSON string. The last line counts them
// and checksums every byte before it (CRC-32C, as a segment line), so a damaged file is told
// from a whole one and read as absent. Written to a temporary beside it and renamed over it.
#pragma once

#include <mira/store/run_meta.hpp>
#include <mira/store/run_store.hpp>

#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace mira::store::detail {

inline constexpr char plan_keys_file[] = "plan-keys.ndjson";

/// Saves `keys` as the plan of session number `session` (1-based) started at `started`, in
/// the run folder: a temporary created beneath the folder's descriptor (O_NOFOLLOW), synced and
/// renamed over plan-keys.ndjson (a link there is replaced, never written through), then the
/// folder synced.
boost::system::error_code write_plan_keys(const std::filesystem::path& folder, std::size_t session,
                                          std::string_view started, const plan_keys& keys);

/// Hands each key in `text` (a plan-keys file's bytes) to `key`, in the file's order, when the
/// file is the plan of `meta`'s last session: true. False, and no key handed, when it is another
/// session's. The error says why `text` is not a whole plan-keys file of the size that session
/// planned; keys handed before it are void.
tl::expected<bool, std::string> decode_plan_keys(std::string_view text, const run_meta& meta,
                                                 const std::function<void(std::string_view)>& key);

/// decode_plan_keys of the run folder's file: false when there is none. The error names the
/// file (a symbolic link, which is never read through; unreadable; damaged).
tl::expected<bool, std::string> read_plan_keys(const std::filesystem::path& folder,
                                               const run_meta& meta,
                                               const std::function<void(std::string_view)>& key);

}  // namespace mira::store::detail
