// Items handed from another thread (a run's session) to an executor that runs one handler at a
// time (the server's), delivered there in order, a slice per handler. One handler per item would
// queue a burst ahead of the executor's I/O: a cancelled run reports every case it did not run at
// once (tens of thousands), and every client waited for all of them (1.9 s for /healthz on a busy
// machine). Between two slices the executor serves its clients.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

namespace mira::serve::detail {

template <class T>
class handover : public std::enable_shared_from_this<handover<T>> {
 public:
  using deliver_fn = std::function<void(std::span<T>)>;

  /// `deliver` is called on `ex` with at most `slice` items at a time.
  handover(boost::asio::any_io_executor ex, std::size_t slice, deliver_fn deliver)
      : ex_(std::move(ex)), slice_(slice ? slice : 1), deliver_(std::move(deliver)) {}

  /// Any thread: `item` is delivered after every item pushed before it.
  void push(T item) {
    {
      std::lock_guard lock(mutex_);
      incoming_.push_back(std::move(item));
      if (std::exchange(posted_, true)) return;  // the queued slice takes it
    }
    post_slice();
  }

  /// Whether every item pushed so far has been delivered (and no slice is queued).
  bool idle() {
    std::lock_guard lock(mutex_);
    return !posted_;
  }

 private:
  void post_slice() {
    boost::asio::post(ex_, [self = this->shared_from_this()] { self->run_slice(); });
  }

  // On ex_: the next slice, then another turn behind whatever the executor queued meanwhile.
  void run_slice() {
    if (next_ == taken_.size()) {
      taken_.clear();
      next_ = 0;
      std::lock_guard lock(mutex_);
      if (incoming_.empty()) {
        posted_ = false;
        return;
      }
      std::swap(taken_, incoming_);
    }
    const auto n = std::min(slice_, taken_.size() - next_);
    deliver_(std::span<T>(taken_).subspan(next_, n));
    next_ += n;
    post_slice();
  }

  boost::asio::any_io_executor ex_;
  std::size_t slice_;
  deliver_fn deliver_;
  std::mutex mutex_;
  std::vector<T> incoming_;  // guarded by mutex_
  bool posted_ = false;      // guarded by mutex_: a slice is queued or running
  std::vector<T> taken_;     // ex_ only: being delivered, from next_ on
  std::size_t next_ = 0;
};

}  // namespace mira::serve::detail
