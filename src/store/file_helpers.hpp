// The store's own file helpers, private to the library: raw-descriptor writes, directory syncs,
// temporary names beside a file, and reading a JSON file back. Their bodies are in files.cpp,
// beside the public helpers (files.hpp) built on them.
#pragma once

#include <boost/json/object.hpp>
#include <boost/system/error_code.hpp>

#include <filesystem>
#include <optional>
#include <string_view>

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
}  // namespace detail

/// The JSON object in the file at `path`; nothing when the file cannot be read or does not hold
/// one object (a torn or foreign file).
std::optional<boost::json::object> read_json_object(const std::filesystem::path& path);

}  // namespace mira::store
