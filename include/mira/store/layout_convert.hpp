// Converting a saved run between its two layouts (per-case files, compact segments) without
// ever holding a record in neither: the new layout is written and made durable first, the old
// one's files are removed only after that, and only those whose record the new layout now holds.
#pragma once

#include <mira/store/error.hpp>
#include <mira/store/run_meta.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace mira::store {

struct convert_counts {
  std::size_t records = 0;        // distinct keys written in the new layout
  std::size_t removed_files = 0;  // files of the old layout removed afterwards
  /// What was dropped or left behind: a torn segment tail (never acknowledged), an old file
  /// whose content the new layout does not hold and that was therefore kept.
  std::vector<std::string> notes;
};

/// Rewrites every record of `run_dir`'s other layout in layout `to`, durably, then removes the
/// old layout's files (and its folder when that leaves it empty). Refuses, changing nothing,
/// when the old layout holds a record it cannot read (an unreadable result.json, a damaged
/// segment line before the last segment's tail) or is missing, or when a compact record names
/// another key than its line. On a write failure the old layout is left intact and the error
/// says so; records already written in the new layout stay (a second conversion rewrites them).
/// Records already in the new layout (an interrupted conversion) stay; for a key in both, the
/// old layout's record wins. Takes the segment directory's writer lock while it works; the
/// caller holds the run (a run_store opened on it, as `mira store convert` does), so no
/// session writes the folder meanwhile. Errors: errc::not_found (no old layout to convert),
/// errc::corrupt (a record it cannot read), errc::in_use (a segment writer holds the
/// directory), errc::io (a write failed), errc::invalid_id (the folder's name is no run id).
tl::expected<convert_counts, error> convert_run_layout(const std::filesystem::path& run_dir,
                                                       layout to);

}  // namespace mira::store
