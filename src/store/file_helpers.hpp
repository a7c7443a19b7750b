// The store's own file helpers, private to the library: raw-descriptor writes, directory syncs,
// temporary names beside a file, whole files written atomically, key names read back, and
// reading a JSON file back. Their bodies are in files.cpp, beside the public helpers (files.hpp)
// built on them.
#pragma once

#include <boost/json/object.hpp>
#include <boost/system/error_code.hpp>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace mira::store {

namespace detail {
/// All of `bytes` to `fd`, retrying short writes and EINTR.
boost::system::error_code write_all(int fd, std::string_view bytes);
/// fsync of a directory, so the entries created or renamed in it are durable; why it could not
/// be opened or synced.
boost::system::error_code sync_directory(const std::filesystem::path& dir);
/// ".<name>.tmp-<random>" beside `path`: where a new version is written before the rename.
std::filesystem::path temp_path_for(const std::filesystem::path& path);
/// Creates `path` (which must not exist) with `contents`; fsyncs it when `sync`. Removes it
/// again on failure.
boost::system::error_code write_new_file(const std::filesystem::path& path,
                                         std::string_view contents, bool sync);

/// A descriptor of `rel` (a relative path without "..") beneath the directory `root`, opened a
/// component at a time and never through a symbolic link: a run folder is copied, shared and
/// unpacked from archives, and a link in it must not make the store read or write elsewhere.
/// Each folder on the way is opened O_DIRECTORY | O_NOFOLLOW (made first when `create`), the
/// last component with `flags | O_NOFOLLOW`. -1 with errno on failure: ELOOP (or ENOTDIR) for
/// a link, EINVAL for a path that is not beneath.
int open_beneath(int root, const std::filesystem::path& rel, int flags, bool create = false);
/// open_beneath for a folder: O_RDONLY | O_DIRECTORY, made (with the folders on the way) when
/// `create`.
int open_dir_beneath(int root, const std::filesystem::path& rel, bool create);
/// "PATH: REASON" for an open that failed with `err`, saying plainly when PATH is a link.
std::string open_failure(const std::filesystem::path& path, int err);
/// True when `path` itself is a symbolic link (what an O_NOFOLLOW open refuses with ELOOP, or
/// ENOTDIR when a folder was asked for).
bool is_link(const std::filesystem::path& path);
/// The JSON string that starts at `at` in `text` (its opening quote), unescaped, and the offset
/// just past it; nothing when no valid JSON string starts there. A key in a segment line or in
/// plan-keys.ndjson.
std::optional<std::pair<std::string, std::size_t>> read_json_string(std::string_view text,
                                                                    std::size_t at);
}  // namespace detail

/// The key of a directory name made by encode_key; nothing for a hashed (long) one or for a
/// name encode_key cannot have made.
std::optional<std::string> decode_key(std::string_view name);

/// Writes `contents` so that `path` either keeps its old contents or has all of the new ones,
/// even if the process dies at any point: a temporary file in the same directory, fsync,
/// rename over `path`, fsync of the directory.
boost::system::error_code write_file_atomic(const std::filesystem::path& path,
                                            std::string_view contents);

/// The JSON object in the file at `path`; nothing when the file cannot be read, is a symbolic
/// link (never followed: every caller reads a file the store wrote) or does not hold one object
/// (a torn or foreign file).
std::optional<boost::json::object> read_json_object(const std::filesystem::path& path);

}  // namespace mira::store
