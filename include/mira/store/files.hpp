// Building blocks of the run store that its users see too: run ids, case-key directory names
// that cannot escape the run folder, write errors, atomic files and the files a user names
// (--out). Free of any connection or CLI; the store's own helpers are in src/store/.
#pragma once

#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace mira::store {

/// "20261130T081502Z-3fa9": UTC start second and 16 random bits, so ids sort by start time
/// and two runs started in the same second still differ.
std::string new_run_id(std::chrono::system_clock::time_point now, std::uint16_t random);

/// Why `id` cannot name a run folder (empty, too long, a path separator, "..", a character
/// outside [A-Za-z0-9._-]), or nothing when it can.
std::optional<std::string> invalid_run_id(std::string_view id);

/// A directory name for a case key, using only [A-Za-z0-9_-]: letters, digits and '-' stay,
/// every other byte becomes _xx (two lower-case hex digits). Reversible; a name of 200 bytes or
/// more is cut and ends in "__" and a SHA-256 prefix of the key instead ("__" never appears
/// otherwise), so it is always under 200 bytes.
std::string encode_key(std::string_view key);

/// A failed write of the store: the error and the file it failed on, so every message about it
/// can name the file (a full disk says which run and which file, not only "No space left").
struct write_error {
  boost::system::error_code code;
  std::filesystem::path path;

  explicit operator bool() const { return static_cast<bool>(code); }
  /// "cannot write PATH: REASON".
  std::string message() const;
};

/// A file written so that `path` either keeps its old contents or has all of the new ones, even
/// if the process dies at any point, from contents produced piece by piece (a report of a
/// million cases is not built in memory first): appended to a temporary beside `path`, which
/// commit() syncs and renames over it, then syncs the directory. Destroyed without a commit, the
/// temporary is removed and `path` is as it was.
class atomic_file {
 public:
  static tl::expected<atomic_file, boost::system::error_code> create(
      const std::filesystem::path& path);
  atomic_file(atomic_file&& other) noexcept;
  atomic_file& operator=(atomic_file&&) = delete;
  ~atomic_file();

  /// Buffered; the first error sticks and is returned by commit() too.
  boost::system::error_code write(std::string_view bytes);
  boost::system::error_code commit();

 private:
  atomic_file(std::filesystem::path path, std::filesystem::path temp, int fd);
  boost::system::error_code flush();

  std::filesystem::path path_;
  std::filesystem::path temp_;
  int fd_ = -1;
  std::string buffer_;
  boost::system::error_code error_;
};

/// A file the user named (--out): written the way the kind of thing at `path` needs, never
/// replacing or removing anything but the named file.
///  - a regular file or a new path: like atomic_file (a temporary beside it, renamed over it
///    by commit());
///  - "-": standard output;
///  - a character or block device, a FIFO or a socket: written in place (opening a FIFO waits
///    for its reader, as a shell redirection does);
///  - a symbolic link: followed, and its final target written as above, so the link stays a
///    link; a link to one of this process's descriptors (/dev/stdout, /dev/fd/N,
///    /proc/self/fd/N) writes to that descriptor;
///  - a directory: EISDIR.
/// Destroyed without a commit, a regular file is as it was; bytes already written in place
/// cannot be taken back.
class output_file {
 public:
  static tl::expected<output_file, boost::system::error_code> open(
      const std::filesystem::path& path);
  output_file(output_file&& other) noexcept;
  output_file& operator=(output_file&&) = delete;
  ~output_file();

  /// Buffered; the first error sticks and is returned by commit() too.
  boost::system::error_code write(std::string_view bytes);
  /// Everything written out (and, for a regular file, renamed into place).
  boost::system::error_code commit();

  /// True when the output is replaced atomically (a regular file or a new path).
  bool atomic() const { return atomic_.has_value(); }
  /// The file that is written: `path`, or the end of its chain of symbolic links.
  const std::filesystem::path& target() const { return target_; }

 private:
  output_file(std::filesystem::path target, std::optional<atomic_file> atomic, int fd, bool owned);
  boost::system::error_code flush();

  std::filesystem::path target_;
  std::optional<atomic_file> atomic_;
  int fd_ = -1;         // in place: the descriptor written
  bool owned_ = false;  // closed by commit() (not a descriptor of the process, like stdout)
  std::string buffer_;
  boost::system::error_code error_;
};

}  // namespace mira::store
