// The writer thread under both run layouts: it takes everything submitted since its last batch
// and has the layout write it, make it durable and report it. The per-case files (batch_writer)
// and the compact segments (segment_writer) differ only in what an item is and how a batch is
// written; the queue, its bound, the draining and the stopping are this one class.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace mira::store::detail {

template <class Item>
class batch_thread {
 public:
  /// On the thread: writes one batch, makes it durable and runs its items' callbacks. The items
  /// are the layout's to move from; they are destroyed after the call, on the thread.
  using write_fn = std::function<void(std::span<Item> batch)>;

  /// Starts the thread. `max_queued`: how many records may wait (an item weighs what its
  /// submit() says); submit() blocks beyond that, so a disk slower than the producer slows the
  /// producer instead of growing memory (0 means 1).
  batch_thread(std::size_t max_queued, write_fn write)
      : write_(std::move(write)),
        max_queued_(max_queued == 0 ? 1 : max_queued),
        thread_([this] { run(); }) {}
  /// stop().
  ~batch_thread() { stop(); }
  batch_thread(const batch_thread&) = delete;
  batch_thread& operator=(const batch_thread&) = delete;

  /// Queues an item of `weight` records; blocks while the queue holds `max_queued` of them (an
  /// item heavier than that waits for an empty queue).
  void submit(Item i, std::size_t weight = 1) {
    {
      std::unique_lock lock(mutex_);
      room_.wait(lock, [&] { return queued_ == 0 || queued_ + weight <= max_queued_; });
      queue_.push_back(std::move(i));
      queued_ += weight;
      ++submitted_;
    }
    wake_.notify_one();
  }
  /// Blocks until everything submitted before the call is written and its callbacks have run.
  void drain() {
    std::unique_lock lock(mutex_);
    auto target = submitted_;
    drained_.wait(lock, [&] { return completed_ >= target; });
  }
  /// Writes and reports what is still queued, then ends the thread. The owner calls it before
  /// it releases anything `write` uses.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    // Two buffers swapped in turn: the queue gets back the last batch's, cleared, so a steady
    // stream of writes allocates nothing per batch.
    std::vector<Item> batch;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left
        batch.swap(queue_);
        queued_ = 0;
      }
      room_.notify_all();
      write_(batch);
      const auto n = batch.size();
      batch.clear();
      {
        std::lock_guard lock(mutex_);
        completed_ += n;
      }
      drained_.notify_all();
    }
  }

  write_fn write_;
  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable wake_, drained_, room_;
  std::vector<Item> queue_;
  std::size_t queued_ = 0;  // the weight of queue_
  std::size_t submitted_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mira::store::detail
