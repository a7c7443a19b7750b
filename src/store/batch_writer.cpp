// Batched atomic writes on a thread of their own (see batch_writer.hpp).
#include <mira/store/batch_writer.hpp>
#include <mira/store/files.hpp>
#include "store/batch_thread.hpp"
#include "store/file_helpers.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace mira::store {

namespace detail {

/// One file to write: its path, its contents, and what to call once it is durable or failed.
struct file_write {
  std::string path;
  std::string bytes;
  batch_writer::done_fn done;
};

}  // namespace detail

namespace {

boost::system::error_code last_error() {
  return {errno, boost::system::system_category()};
}

void write_batch(int root_fd, std::span<detail::file_write> batch) {
  std::vector<boost::system::error_code> result(batch.size());
  std::vector<std::filesystem::path> temps(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::filesystem::path path = batch[i].path;
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      result[i] = {ec.value(), boost::system::system_category()};
      continue;
    }
    temps[i] = detail::temp_path_for(path);
    result[i] = detail::write_new_file(temps[i], batch[i].bytes, false);
  }
  // One flush of the filesystem for the whole batch instead of an fsync per file (sync() of
  // everything when the root could not be opened).
  auto sync_all = [&]() -> boost::system::error_code {
    if (root_fd >= 0) return ::syncfs(root_fd) == 0 ? boost::system::error_code{} : last_error();
    ::sync();
    return {};
  };
  auto synced = sync_all();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (result[i]) continue;
    if (synced) {
      result[i] = synced;
    } else if (::rename(temps[i].c_str(), batch[i].path.c_str()) != 0) {
      result[i] = last_error();
    }
    if (result[i]) ::unlink(temps[i].c_str());
  }
  if (auto renamed = sync_all())
    for (auto& r : result)
      if (!r) r = renamed;
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (batch[i].done) batch[i].done(result[i]);
}

}  // namespace

batch_writer::batch_writer(const std::filesystem::path& sync_root, std::size_t max_queued)
    : root_fd_(::open(sync_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)),
      thread_(std::make_unique<detail::batch_thread<detail::file_write>>(
          max_queued, [fd = root_fd_](auto batch) { write_batch(fd, batch); })) {}

batch_writer::~batch_writer() {
  thread_->stop();  // before the root's descriptor is closed
  if (root_fd_ >= 0) ::close(root_fd_);
}

void batch_writer::submit(std::filesystem::path path, std::string contents, done_fn done) {
  thread_->submit({path.native(), std::move(contents), std::move(done)});
}

void batch_writer::drain() {
  thread_->drain();
}

}  // namespace mira::store
