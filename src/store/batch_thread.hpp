// The writer thread under both run layouts: it takes everything submitted since its last batch,
// has the layout write the batch and make it durable, then runs each write's callback. The
// per-case files (batch_writer) and the compact segments (segment_writer) differ only in how a
// batch is written; the queue, its bound, the draining and the stopping are this one class.
#pragma once

#include <boost/system/error_code.hpp>

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace mira::store::detail {

/// One submitted write: where it goes (a file's path, a record's key: the layout's choice), its
/// bytes, and what to call once it is durable or failed.
struct batch_item {
  std::string target;
  std::string bytes;
  std::function<void(boost::system::error_code)> done;
};

class batch_thread {
 public:
  using item = batch_item;

  /// Writes one batch and makes it durable, on the thread; `results` has one entry per item,
  /// success on entry, and what it holds on return is what each callback is given.
  using write_fn = std::function<void(std::span<const item> batch,
                                      std::span<boost::system::error_code> results)>;

  /// Starts the thread. `max_queued`: how many writes may wait; submit() blocks beyond that, so
  /// a disk slower than the producer slows the producer instead of growing memory (0 means 1).
  batch_thread(std::size_t max_queued, write_fn write);
  /// stop().
  ~batch_thread();
  batch_thread(const batch_thread&) = delete;
  batch_thread& operator=(const batch_thread&) = delete;

  /// Queues a write; blocks while `max_queued` writes are already waiting.
  void submit(item i);
  /// Blocks until everything submitted before the call is written and its callback has run.
  void drain();
  /// Writes and reports what is still queued, then ends the thread. The owner calls it before
  /// it releases anything `write` uses.
  void stop();

 private:
  void run();

  write_fn write_;
  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable wake_, drained_, room_;
  std::vector<item> queue_;
  std::size_t submitted_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mira::store::detail
