// Seeded files (see seed_files.hpp): path checks, reading a source, and writing into a folder
// through directory descriptors opened without following links, so that nothing the folder
// holds (a link planted in it) can send a write elsewhere.
#include <mira/study/seed_files.hpp>

#include "study/file_io.hpp"
#include "study/unique_fd.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mira::study {

namespace detail {

tl::expected<std::string, error> read_bounded(const std::filesystem::path& file,
                                              std::size_t max_bytes) {
  auto why = [&](int e) {
    return tl::make_unexpected(
        fail(errc::file_unreadable, "cannot read " + file.string() + ": " + std::strerror(e)));
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return why(errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0) return why(errno);
  if (!S_ISREG(st.st_mode))
    return tl::make_unexpected(
        fail(errc::file_unreadable, "cannot read " + file.string() + ": not a regular file"));
  auto size = static_cast<std::size_t>(st.st_size);
  auto too_large = [&](std::size_t n) {
    return tl::make_unexpected(fail(
        errc::file_too_large, file.string() + " is " + std::to_string(n) +
                                  " bytes, more than the limit of " + std::to_string(max_bytes)));
  };
  if (size > max_bytes) return too_large(size);
  std::string out(size, '\0');
  std::size_t got = 0;
  // Read to the end, not to the size stat gave: the file may grow meanwhile, and the bound holds
  // whatever it does.
  for (;;) {
    if (got == out.size()) {
      if (out.size() > max_bytes) return too_large(out.size());
      out.resize(out.size() + 4096);
    }
    auto n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return why(errno);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  if (got > max_bytes) return too_large(got);
  return out;
}

}  // namespace detail

using detail::fail;
using detail::unique_fd;

std::string check_seed_path(std::string_view path) {
  if (path.empty()) return "the path is empty";
  if (path.find('\0') != std::string_view::npos) return "the path holds a NUL byte";
  if (path.front() == '/') return "the path is absolute";
  std::size_t start = 0;
  for (;;) {
    auto end = path.find('/', start);
    auto part = path.substr(start, end == std::string_view::npos ? path.npos : end - start);
    if (part.empty()) return "the path has an empty component";
    if (part == "..") return "the path climbs out of its folder with ..";
    if (part == ".") return "the path has a . component";
    if (end == std::string_view::npos) return {};
    start = end + 1;
  }
}

tl::expected<std::string, error> read_seed_file(const seed_file& f, std::size_t max_bytes) {
  if (!f.source) {
    if (f.contents.size() > max_bytes)
      return tl::make_unexpected(fail(errc::file_too_large, "seeded file " + f.path + " is " +
                                                                std::to_string(f.contents.size()) +
                                                                " bytes, more than the limit of " +
                                                                std::to_string(max_bytes)));
    return f.contents;
  }
  return detail::read_bounded(*f.source, max_bytes);
}

namespace {

tl::unexpected<error> unwritable(const std::string& path, int e) {
  return tl::make_unexpected(
      fail(errc::file_unwritable, "cannot write seeded file " + path + ": " + std::strerror(e)));
}

tl::unexpected<error> unsafe(const std::string& path, const std::string& why) {
  return tl::make_unexpected(fail(errc::unsafe_path, "seeded file " + path + ": " + why));
}

// The directory `name` inside `parent`, made when missing, opened without following a link.
tl::expected<unique_fd, error> enter(int parent, const std::string& name, const std::string& path) {
  constexpr int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  unique_fd fd(::openat(parent, name.c_str(), flags));
  if (!fd && errno == ENOENT) {
    if (::mkdirat(parent, name.c_str(), 0755) < 0 && errno != EEXIST)
      return unwritable(path, errno);
    fd.reset(::openat(parent, name.c_str(), flags));
  }
  if (fd) return fd;
  // ELOOP: a link; ENOTDIR: a file where a folder should be.
  if (errno == ELOOP || errno == ENOTDIR)
    return unsafe(path, "'" + name + "' on its way is a link or not a folder");
  return unwritable(path, errno);
}

// Writes `contents` to `name` in `dir`: only into a regular file with one link, or a new one.
tl::expected<void, error> write_in(int dir, const std::string& name, const std::string& path,
                                   const std::string& contents) {
  // No O_TRUNC: the file is truncated only once it is known to be this folder's own.
  unique_fd fd(
      ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644));
  if (!fd && errno == ELOOP) return unsafe(path, "it is a symbolic link");
  if (!fd && errno == ENXIO) return unsafe(path, "it is a FIFO");
  if (!fd && errno == EISDIR) return unsafe(path, "it is a folder");
  if (!fd) return unwritable(path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) < 0) return unwritable(path, errno);
  if (!S_ISREG(st.st_mode)) return unsafe(path, "it is not a regular file");
  if (st.st_nlink > 1) return unsafe(path, "it has another (hard) link");
  if (::ftruncate(fd.get(), 0) < 0) return unwritable(path, errno);
  std::size_t done = 0;
  while (done < contents.size()) {
    auto n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return unwritable(path, errno);
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd.release()) < 0) return unwritable(path, errno);
  return {};
}

}  // namespace

tl::expected<void, error> materialize_files(const std::vector<seed_file>& files,
                                            const std::filesystem::path& folder,
                                            std::size_t max_bytes) {
  unique_fd root(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root)
    return tl::make_unexpected(
        fail(errc::file_unreadable,
             "cannot open the folder " + folder.string() + ": " + std::strerror(errno)));
  for (auto& f : files) {
    if (auto problem = check_seed_path(f.path); !problem.empty()) return unsafe(f.path, problem);
    auto contents = read_seed_file(f, max_bytes);
    if (!contents) return tl::make_unexpected(std::move(contents.error()));
    unique_fd here;
    int dir = root.get();
    std::size_t start = 0;
    for (auto slash = f.path.find('/'); slash != std::string::npos;
         slash = f.path.find('/', start)) {
      auto next = enter(dir, f.path.substr(start, slash - start), f.path);
      if (!next) return tl::make_unexpected(std::move(next.error()));
      here = std::move(*next);
      dir = here.get();
      start = slash + 1;
    }
    if (auto w = write_in(dir, f.path.substr(start), f.path, *contents); !w) return w;
  }
  return {};
}

}  // namespace mira::study
