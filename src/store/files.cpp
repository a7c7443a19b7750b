// Run-store building blocks (see files.hpp).
#include <mira/store/files.hpp>
#include "protocol/json_scan.hpp"
#include "protocol/precise_json.hpp"
#include "store/digest.hpp"
#include "store/file_helpers.hpp"

#include <boost/json/parse.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <utility>
#include <vector>

namespace mira::store {

std::string new_run_id(std::chrono::system_clock::time_point now, std::uint16_t random) {
  auto t = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &utc);
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "-%04x", random);
  return std::string(buf) + suffix;
}

std::optional<std::string> invalid_run_id(std::string_view id) {
  if (id.empty()) return "a run id cannot be empty";
  if (id.size() > 100) return "a run id is at most 100 characters";
  if (id == "." || id == ".." || id.find("..") != std::string_view::npos)
    return "a run id cannot contain \"..\"";
  for (unsigned char c : id)
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.')
      return "a run id may only contain letters, digits, '.', '_' and '-'";
  return std::nullopt;
}

namespace {

constexpr std::size_t max_name = 199;  // under 200 bytes
constexpr char hex[] = "0123456789abcdef";

bool verbatim(unsigned char c) {
  return std::isalnum(c) || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string encode_key(std::string_view key) {
  std::string out;
  out.reserve(key.size() + 8);
  for (unsigned char c : key) {
    if (verbatim(c)) {
      out += static_cast<char>(c);
    } else {
      out += '_';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (out.size() <= max_name) return out;
  // Cut on a whole escape, then "__" + 32 hex digits of the key's hash.
  std::size_t keep = max_name - 2 - 32;
  while (keep > 0 && (out[keep - 1] == '_' || (keep > 1 && out[keep - 2] == '_'))) --keep;
  out.resize(keep);
  out += "__";
  out += sha256_hex(key).substr(0, 32);
  return out;
}

std::optional<std::string> decode_key(std::string_view name) {
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (verbatim(c)) {
      out += static_cast<char>(c);
      continue;
    }
    if (c != '_' || i + 2 >= name.size()) return std::nullopt;
    int hi = hex_value(name[i + 1]), lo = hex_value(name[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;  // "__": a hashed name
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string write_error::message() const {
  return "cannot write " + path.string() + ": " + code.message();
}

namespace detail {

std::filesystem::path temp_path_for(const std::filesystem::path& path) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  auto dir = path.parent_path();
  if (dir.empty()) dir = ".";
  return dir / ("." + path.filename().string() + ".tmp-" + std::to_string(rng() % 1000000000));
}

boost::system::error_code sync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return {errno, boost::system::system_category()};
  boost::system::error_code ec;
  if (::fsync(fd) != 0) ec = {errno, boost::system::system_category()};
  ::close(fd);
  return ec;
}

boost::system::error_code write_new_file(const std::filesystem::path& path,
                                         std::string_view contents, bool sync) {
  auto fail = [&](int e) {
    ::unlink(path.c_str());
    return boost::system::error_code(e, boost::system::system_category());
  };
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return {errno, boost::system::system_category()};
  if (auto ec = write_all(fd, contents)) {
    ::close(fd);
    return fail(ec.value());
  }
  if ((sync && ::fsync(fd) != 0) || ::close(fd) != 0) return fail(errno);
  return {};
}

namespace {

// open_beneath's walk: the folders of `rel` but its last component, each opened never through a
// link (made first when `create`); the last with `flags`, or as a folder (made too) when
// `last_is_dir`.
int walk_beneath(int root, const std::filesystem::path& rel, int flags, bool create,
                 bool last_is_dir) {
  std::vector<std::string> parts;
  for (auto& c : rel) {
    auto name = c.string();
    if (name.empty() || name == ".") continue;
    if (name == ".." || c.has_root_directory()) {
      errno = EINVAL;
      return -1;
    }
    parts.push_back(std::move(name));
  }
  if (rel.is_absolute()) {
    errno = EINVAL;
    return -1;
  }
  constexpr int dir_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  if (parts.empty()) return last_is_dir ? ::fcntl(root, F_DUPFD_CLOEXEC, 0) : (errno = EINVAL, -1);
  int dir = root;
  auto step = [&](const std::string& name, int open_flags, bool make) {
    // EEXIST: the folder is there (or a link is, which the open below refuses).
    if (make && ::mkdirat(dir, name.c_str(), 0755) != 0 && errno != EEXIST) return -1;
    return ::openat(dir, name.c_str(), open_flags, 0644);
  };
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    int next = last && !last_is_dir ? step(parts[i], flags | O_NOFOLLOW | O_CLOEXEC, false)
                                    : step(parts[i], dir_flags, create);
    int err = errno;
    if (dir != root) ::close(dir);
    if (next < 0) {
      errno = err;
      return -1;
    }
    dir = next;
  }
  return dir;
}

}  // namespace

int open_beneath(int root, const std::filesystem::path& rel, int flags, bool create) {
  return walk_beneath(root, rel, flags, create, false);
}

int open_dir_beneath(int root, const std::filesystem::path& rel, bool create) {
  return walk_beneath(root, rel, 0, create, true);
}

bool is_link(const std::filesystem::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

std::string open_failure(const std::filesystem::path& path, int err) {
  if (err == ELOOP || (err == ENOTDIR && is_link(path)))
    return path.string() +
           " is a symbolic link: the store never reads or writes through a link in a run folder";
  return path.string() + ": " + std::strerror(err);
}

std::optional<std::pair<std::string, std::size_t>> read_json_string(std::string_view text,
                                                                    std::size_t at) {
  if (at >= text.size() || text[at] != '"') return std::nullopt;
  auto end = mira::detail::scan_json_value(text, at);
  if (end == mira::detail::json_scan_failed) return std::nullopt;
  // Most keys have no escape: their bytes are the key.
  auto raw = text.substr(at + 1, end - at - 2);
  if (raw.find('\\') == std::string_view::npos) return std::pair{std::string(raw), end};
  boost::system::error_code ec;
  auto v = boost::json::parse(text.substr(at, end - at), ec);
  if (ec || !v.is_string()) return std::nullopt;
  return std::pair{std::string(v.get_string()), end};
}

}  // namespace detail

namespace {

boost::system::error_code errno_code(int e) {
  return {e, boost::system::system_category()};
}

// Renames `tmp` over `path` and makes the rename itself survive a crash.
boost::system::error_code replace_with(const std::filesystem::path& tmp,
                                       const std::filesystem::path& path) {
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return errno_code(e);
  }
  // The new contents are in place; without this sync a crash could still bring back the old.
  return detail::sync_directory(path.parent_path());
}

}  // namespace

boost::system::error_code write_file_atomic(const std::filesystem::path& path,
                                            std::string_view contents) {
  auto tmp = detail::temp_path_for(path);
  if (auto ec = detail::write_new_file(tmp, contents, true)) return ec;
  return replace_with(tmp, path);
}

tl::expected<atomic_file, boost::system::error_code> atomic_file::create(
    const std::filesystem::path& path) {
  auto tmp = detail::temp_path_for(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return tl::make_unexpected(errno_code(errno));
  return atomic_file(path, std::move(tmp), fd);
}

atomic_file::atomic_file(std::filesystem::path path, std::filesystem::path temp, int fd)
    : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}

atomic_file::atomic_file(atomic_file&& other) noexcept
    : path_(std::move(other.path_)),
      temp_(std::move(other.temp_)),
      fd_(std::exchange(other.fd_, -1)),
      buffer_(std::move(other.buffer_)),
      error_(other.error_) {}

atomic_file::~atomic_file() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_.c_str());
}

boost::system::error_code detail::write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    auto n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_code(errno);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

boost::system::error_code atomic_file::flush() {
  if (!error_) error_ = detail::write_all(fd_, buffer_);
  buffer_.clear();
  return error_;
}

boost::system::error_code atomic_file::write(std::string_view bytes) {
  constexpr std::size_t chunk = std::size_t{1} << 20;
  if (error_ || fd_ < 0) return error_ ? error_ : errno_code(EBADF);
  if (bytes.size() >= chunk) {  // written as it is, not copied first
    if (flush()) return error_;
    return error_ = detail::write_all(fd_, bytes);
  }
  buffer_.append(bytes);
  return buffer_.size() >= chunk ? flush() : error_;
}

boost::system::error_code atomic_file::commit() {
  if (fd_ < 0) return errno_code(EBADF);
  flush();
  if (!error_ && ::fsync(fd_) != 0) error_ = errno_code(errno);
  if (::close(std::exchange(fd_, -1)) != 0 && !error_) error_ = errno_code(errno);
  if (error_) {
    ::unlink(temp_.c_str());
    return error_;
  }
  return replace_with(temp_, path_);
}

namespace {

// Where output_file::open writes `path`, once its symbolic links are followed.
struct output_target {
  std::filesystem::path path;
  enum { replace, in_place, descriptor } how = replace;
  int fd = -1;  // for `descriptor`
};

// A descriptor of this process named through /proc/self/fd/N or /proc/<own pid>/fd/N.
std::optional<int> own_descriptor(const std::filesystem::path& dir, const std::string& name) {
  const auto own = "/proc/" + std::to_string(::getpid()) + "/fd";
  if (dir != own && dir != "/proc/self/fd") return std::nullopt;
  int fd = -1;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
  if (ec != std::errc{} || end != name.data() + name.size() || fd < 0) return std::nullopt;
  return fd;
}

tl::expected<output_target, boost::system::error_code> resolve_output(std::filesystem::path path) {
  if (path == "-") return output_target{path, output_target::descriptor, STDOUT_FILENO};
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return output_target{path};  // a new file (or a dangling link's)
      return tl::make_unexpected(errno_code(errno));
    }
    if (S_ISREG(st.st_mode)) return output_target{path};
    if (S_ISDIR(st.st_mode)) return tl::make_unexpected(errno_code(EISDIR));
    if (!S_ISLNK(st.st_mode)) return output_target{path, output_target::in_place};
    if (hops == 40) return tl::make_unexpected(errno_code(ELOOP));
    std::error_code ec;
    auto dir = std::filesystem::canonical(path.has_parent_path() ? path.parent_path() : ".", ec);
    if (ec) return tl::make_unexpected(boost::system::error_code(ec));
    if (auto fd = own_descriptor(dir, path.filename().string()))
      return output_target{path, output_target::descriptor, *fd};
    // Another process's descriptor cannot be renamed over: written in place.
    if (dir.string().rfind("/proc/", 0) == 0) return output_target{path, output_target::in_place};
    auto next = std::filesystem::read_symlink(path, ec);
    if (ec) return tl::make_unexpected(boost::system::error_code(ec));
    path = next.is_absolute() ? next : dir / next;
  }
}

}  // namespace

tl::expected<output_file, boost::system::error_code> output_file::open(
    const std::filesystem::path& path) {
  auto target = resolve_output(path);
  if (!target) return tl::make_unexpected(target.error());
  switch (target->how) {
    case output_target::replace: {
      auto file = atomic_file::create(target->path);
      if (!file) return tl::make_unexpected(file.error());
      return output_file(target->path, std::move(*file), -1, false);
    }
    case output_target::descriptor:
      return output_file(target->path, std::nullopt, target->fd, false);
    case output_target::in_place:
      break;
  }
  // No O_CREAT: a device or FIFO that vanished since the lstat is not made a regular file.
  int fd = ::open(target->path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return tl::make_unexpected(errno_code(errno));
  return output_file(target->path, std::nullopt, fd, true);
}

output_file::output_file(std::filesystem::path target, std::optional<atomic_file> atomic, int fd,
                         bool owned)
    : target_(std::move(target)), atomic_(std::move(atomic)), fd_(fd), owned_(owned) {}

output_file::output_file(output_file&& other) noexcept
    : target_(std::move(other.target_)),
      atomic_(std::move(other.atomic_)),
      fd_(std::exchange(other.fd_, -1)),
      owned_(std::exchange(other.owned_, false)),
      buffer_(std::move(other.buffer_)),
      error_(other.error_) {
  other.atomic_.reset();
}

output_file::~output_file() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

boost::system::error_code output_file::flush() {
  // Standard output may hold the caller's own text (the table printed before the report).
  if (fd_ == STDOUT_FILENO) std::fflush(stdout);
  if (fd_ == STDERR_FILENO) std::fflush(stderr);
  if (!error_) error_ = detail::write_all(fd_, buffer_);
  buffer_.clear();
  return error_;
}

boost::system::error_code output_file::write(std::string_view bytes) {
  if (atomic_) return atomic_->write(bytes);
  constexpr std::size_t chunk = std::size_t{1} << 16;
  if (error_ || fd_ < 0) return error_ ? error_ : errno_code(EBADF);
  if (bytes.size() >= chunk) {  // written as it is, not copied first
    if (flush()) return error_;
    return error_ = detail::write_all(fd_, bytes);
  }
  buffer_.append(bytes);
  return buffer_.size() >= chunk ? flush() : error_;
}

boost::system::error_code output_file::commit() {
  if (atomic_) {
    auto ec = atomic_->commit();
    atomic_.reset();
    return ec;
  }
  if (fd_ < 0) return errno_code(EBADF);
  flush();
  if (owned_ && ::close(fd_) != 0 && !error_) error_ = errno_code(errno);
  fd_ = -1;
  owned_ = false;
  return error_;
}

std::optional<boost::json::object> read_json_object(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[64 << 10];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      if (n < 0) return std::nullopt;
      break;
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  boost::system::error_code ec;
  // The host's limits (nesting 256), as for the study's lines: what was saved must read back,
  // its doubles too.
  auto v = mira::detail::parse_json_precise(text, ec, mira::detail::host_parse_options());
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

}  // namespace mira::store
