// The writer thread of both run layouts (see batch_thread.hpp).
#include "store/batch_thread.hpp"

namespace mira::store::detail {

batch_thread::batch_thread(std::size_t max_queued, write_fn write)
    : write_(std::move(write)),
      max_queued_(max_queued == 0 ? 1 : max_queued),
      thread_([this] { run(); }) {}

batch_thread::~batch_thread() {
  stop();
}

void batch_thread::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void batch_thread::submit(item i) {
  {
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return queue_.size() < max_queued_; });
    queue_.push_back(std::move(i));
    ++submitted_;
  }
  wake_.notify_one();
}

void batch_thread::drain() {
  std::unique_lock lock(mutex_);
  auto target = submitted_;
  drained_.wait(lock, [&] { return completed_ >= target; });
}

void batch_thread::run() {
  // Two buffers swapped in turn: the queue gets back the last batch's, cleared, so a steady
  // stream of writes allocates nothing per batch.
  std::vector<item> batch;
  std::vector<boost::system::error_code> results;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      batch.swap(queue_);
    }
    room_.notify_all();
    results.assign(batch.size(), {});
    write_(batch, results);
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].done) batch[i].done(results[i]);
    const auto n = batch.size();
    batch.clear();
    {
      std::lock_guard lock(mutex_);
      completed_ += n;
    }
    drained_.notify_all();
  }
}

}  // namespace mira::store::detail
