// Atomic file writes off the caller's thread, in batches, for saving many small results
// without an fsync per file on the event loop. A thread of its own takes everything submitted
// since its last batch and: writes each to a temporary beside its path (directories created as
// needed), makes them durable with one syncfs(), renames each over its path, and makes the
// renames durable with a second syncfs(). Every file is beneath the writer's root folder and is
// reached from it never through a symbolic link (a link on the way fails that file with ELOOP
// or ENOTDIR, and nothing is written). Only then is each file's callback called (on the
// writer's thread), so "done" means what write_file_atomic() means: a crash at any moment
// leaves either the old file or the whole new one, and a reported file survives a power loss.
#pragma once

#include <boost/system/error_code.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace mira::store {

namespace detail {
template <class Item>
class batch_thread;
struct file_write;
}  // namespace detail

class batch_writer {
 public:
  using done_fn = std::function<void(boost::system::error_code)>;

  /// `root`: the folder every file goes beneath (a path given to submit() that is not beneath
  /// it fails with EINVAL), also the filesystem syncfs() makes durable. `max_queued`: how many
  /// files may wait for the writer; submit() blocks beyond that, so a disk slower than the producer
  /// slows the producer instead of growing memory without bound.
  explicit batch_writer(const std::filesystem::path& root, std::size_t max_queued = 4096);
  /// Writes what is still queued, then stops the thread.
  ~batch_writer();
  batch_writer(const batch_writer&) = delete;
  batch_writer& operator=(const batch_writer&) = delete;

  /// Queues a file beneath the root; blocks while `max_queued` files are already waiting.
  void submit(std::filesystem::path path, std::string contents, done_fn done);
  /// Blocks until everything submitted before the call is written and reported.
  void drain();

 private:
  std::filesystem::path root_;
  int root_fd_ = -1;
  int root_error_ = 0;  // why the root could not be opened: every file fails with it
  std::unique_ptr<detail::batch_thread<detail::file_write>>
      thread_;  // the queue and the thread (batch_thread.hpp)
};

}  // namespace mira::store
