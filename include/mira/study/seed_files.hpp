// Seeded files (sample::files): checking a seeded file's path, reading its contents, and writing
// a sample's files into a work folder without writing anywhere else. A subject that runs an
// external agent makes a folder, materialises the sample's files into it, and points the agent
// at it.
#pragma once

#include <mira/study/error.hpp>
#include <mira/study/sample.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mira::study {

/// The largest seeded file read from its source unless told otherwise: 64 MiB.
inline constexpr std::size_t default_max_seed_bytes = std::size_t{64} << 20;

/// What is wrong with `path` as a seeded file's path (empty, absolute, a "." or ".." component,
/// an empty component as in "a//b" or "a/", a NUL byte), or an empty string when nothing is.
/// Such a path stays inside any folder it is joined to, whatever the folder holds, once no
/// component on the way is a link (materialize_files checks that as it goes).
std::string check_seed_path(std::string_view path);

/// The contents of `f`: `contents`, or its `source` read whole. Errors: file_unreadable (the
/// source cannot be opened or read, or is not a regular file), file_too_large (over max_bytes).
/// Blocking file I/O: a subject calls it through run_context::blocking.
tl::expected<std::string, error> read_seed_file(const seed_file& f,
                                                std::size_t max_bytes = default_max_seed_bytes);

/// Writes `files` under `folder`, an existing directory (a fresh temporary one, typically),
/// making the directories their paths name. Nothing is written outside `folder`: each path is
/// checked (check_seed_path; unsafe_path when it fails), every directory on the way is opened
/// without following a link, and a file is written only when it is a regular file with no other
/// link (a symbolic link, a hard link, a FIFO or a directory in the way is unsafe_path). A file
/// already there is overwritten, so a later entry for one path wins. Stops at the first error,
/// having written the files before it: file_unreadable (a source, or `folder` itself),
/// file_too_large, file_unwritable (naming the file and the system's reason). Blocking file I/O.
tl::expected<void, error> materialize_files(const std::vector<seed_file>& files,
                                            const std::filesystem::path& folder,
                                            std::size_t max_bytes = default_max_seed_bytes);

}  // namespace mira::study
