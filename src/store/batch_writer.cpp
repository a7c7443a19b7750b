// Batched atomic writes on a thread of their own (see batch_writer.hpp).
#include <mira/store/batch_writer.hpp>
#include <mira/store/files.hpp>
#include "store/file_helpers.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace mira::store {

namespace {

boost::system::error_code last_error() {
  return {errno, boost::system::system_category()};
}

}  // namespace

batch_writer::batch_writer(const std::filesystem::path& sync_root, std::size_t max_queued)
    : root_fd_(::open(sync_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)),
      max_queued_(max_queued == 0 ? 1 : max_queued),
      thread_([this] { run(); }) {}

batch_writer::~batch_writer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  if (root_fd_ >= 0) ::close(root_fd_);
}

void batch_writer::submit(std::filesystem::path path, std::string contents, done_fn done) {
  {
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return queue_.size() < max_queued_; });
    queue_.push_back({std::move(path), std::move(contents), std::move(done)});
    ++submitted_;
  }
  wake_.notify_one();
}

void batch_writer::drain() {
  std::unique_lock lock(mutex_);
  auto target = submitted_;
  drained_.wait(lock, [&] { return completed_ >= target; });
}

void batch_writer::run() {
  for (;;) {
    std::deque<item> batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      batch.swap(queue_);
    }
    room_.notify_all();
    write_batch(batch);
    {
      std::lock_guard lock(mutex_);
      completed_ += batch.size();
    }
    drained_.notify_all();
  }
}

void batch_writer::write_batch(std::deque<item>& batch) {
  std::vector<boost::system::error_code> result(batch.size());
  std::vector<std::filesystem::path> temps(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    std::error_code ec;
    std::filesystem::create_directories(batch[i].path.parent_path(), ec);
    if (ec) {
      result[i] = {ec.value(), boost::system::system_category()};
      continue;
    }
    temps[i] = detail::temp_path_for(batch[i].path);
    result[i] = detail::write_new_file(temps[i], batch[i].contents, false);
  }
  // One flush of the filesystem for the whole batch instead of an fsync per file (sync() of
  // everything when the root could not be opened).
  auto sync_all = [&]() -> boost::system::error_code {
    if (root_fd_ >= 0) return ::syncfs(root_fd_) == 0 ? boost::system::error_code{} : last_error();
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

}  // namespace mira::store
