// Batched atomic writes on a thread of their own (see batch_writer.hpp).
#include "store/batch_writer.hpp"
#include <mira/store/files.hpp>
#include "store/batch_thread.hpp"
#include "store/file_helpers.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace mira::store {

namespace detail {

/// One file to write: its path beneath the writer's root, its contents, and what to call once it
/// is durable or failed.
struct file_write {
  std::filesystem::path path;
  std::string bytes;
  batch_writer::done_fn done;
};

}  // namespace detail

namespace {

boost::system::error_code last_error() {
  return {errno, boost::system::system_category()};
}

// Writes the temporary of `file` beside it (folders made as needed), never through a link:
// its name, or the error.
boost::system::error_code write_temporary(int root_fd, const detail::file_write& file,
                                          std::string& temp) {
  int dir = detail::open_dir_beneath(root_fd, file.path.parent_path(), true);
  if (dir < 0) return last_error();
  temp = detail::temp_path_for(file.path).filename().string();
  boost::system::error_code ec;
  int fd = ::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    ec = last_error();
  } else {
    ec = detail::write_all(fd, file.bytes);
    if (::close(fd) != 0 && !ec) ec = last_error();
    if (ec) ::unlinkat(dir, temp.c_str(), 0);
  }
  ::close(dir);
  return ec;
}

// Renames the temporary over the file, in the folder open_dir_beneath finds again (no link).
boost::system::error_code rename_temporary(int root_fd, const detail::file_write& file,
                                           const std::string& temp, bool keep) {
  int dir = detail::open_dir_beneath(root_fd, file.path.parent_path(), false);
  if (dir < 0) return last_error();
  boost::system::error_code ec;
  if (keep && ::renameat(dir, temp.c_str(), dir, file.path.filename().c_str()) != 0)
    ec = last_error();
  if (!keep || ec) ::unlinkat(dir, temp.c_str(), 0);
  ::close(dir);
  return ec;
}

void write_batch(int root_fd, int root_error, std::span<detail::file_write> batch) {
  std::vector<boost::system::error_code> result(batch.size());
  std::vector<std::string> temps(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i)
    result[i] = root_fd < 0
                    ? boost::system::error_code(root_error, boost::system::system_category())
                    : write_temporary(root_fd, batch[i], temps[i]);
  if (root_fd < 0) {
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].done) batch[i].done(result[i]);
    return;
  }
  // One flush of the filesystem for the whole batch instead of an fsync per file.
  auto sync_all = [&]() -> boost::system::error_code {
    return ::syncfs(root_fd) == 0 ? boost::system::error_code{} : last_error();
  };
  auto synced = sync_all();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (result[i]) continue;
    auto renamed = rename_temporary(root_fd, batch[i], temps[i], !synced);
    result[i] = synced ? synced : renamed;
  }
  if (auto renamed = sync_all())
    for (auto& r : result)
      if (!r) r = renamed;
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (batch[i].done) batch[i].done(result[i]);
}

}  // namespace

batch_writer::batch_writer(const std::filesystem::path& root, std::size_t max_queued)
    : root_(root),
      root_fd_(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)),
      root_error_(root_fd_ < 0 ? errno : 0),
      thread_(std::make_unique<detail::batch_thread<detail::file_write>>(
          max_queued,
          [fd = root_fd_, err = root_error_](auto batch) { write_batch(fd, err, batch); })) {}

batch_writer::~batch_writer() {
  thread_->stop();  // before the root's descriptor is closed
  if (root_fd_ >= 0) ::close(root_fd_);
}

void batch_writer::submit(std::filesystem::path path, std::string contents, done_fn done) {
  // Beneath the root: open_beneath refuses a path that leaves it (EINVAL).
  auto rel = path.lexically_relative(root_);
  if (rel.empty()) rel = "..";
  thread_->submit({std::move(rel), std::move(contents), std::move(done)});
}

void batch_writer::drain() {
  thread_->drain();
}

}  // namespace mira::store
