// The session's saves on their way to the store's writer thread and back: the I/O half of what
// the run ledger (ledger.hpp) decides. Used by session.cpp only.
#pragma once

#include <mira/protocol/json_text.hpp>
#include <mira/store/artifacts.hpp>
#include <mira/store/records.hpp>
#include <mira/store/run_store.hpp>
#include "session/ledger.hpp"
#include "store/batch_writer.hpp"
#include "store/case_batch.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mira::detail {

// The run's records go to their writer a batch per turn of the event loop. The first record into
// an empty batch posts the batch's hand-over, so every record that ends in the same turn
// (run_plan takes in together what the study sent together) joins it, while the record of a slow
// study is handed over at once: no timer, no window of unsaved results. A batch is one buffer of
// lines with one callback, and the writer gives it back, so that a record allocates nothing once
// the buffers have grown and nothing crosses threads per record (what malloc's arena locks made
// costly when each record was strings and a closure of its own). What comes back is told to the
// ledger (failures, saves settled) and to the hooks (on_saved, on_save_failed).
// Shared with the posted hand-overs and the writers' callbacks, which may run after the run's
// frame is gone (it forgets the writers and the ledger first: forget()); used on the session's
// executor only, which runs one handler at a time.
class result_saver : public std::enable_shared_from_this<result_saver> {
 public:
  using tell_failed_fn = std::function<void(const std::string& key, const std::string& why)>;
  using tell_saved_fn = std::function<void(std::span<const std::size_t>)>;

  result_saver(boost::asio::any_io_executor ex, run_ledger& ledger, tell_failed_fn tell_failed,
               tell_saved_fn tell_saved)
      : ex_(ex),
        ledger_(&ledger),
        tell_failed_(std::move(tell_failed)),
        tell_saved_(std::move(tell_saved)),
        settled_(ex, boost::asio::steady_timer::time_point::max()) {}

  void use(store::run_store::case_writer* w) { writer_ = w; }
  void use(const store::artifact_dir& dir) { artifacts_.emplace(dir.path()); }

  /// A save that failed before any could be handed over.
  void failed(failed_save f) {
    if (tell_failed_) tell_failed_(f.key, f.message);
    ledger_->save_failed(std::move(f));
  }

  /// Saves the record of case `i` of `cases` with outcome `r`.
  void record(const plan::case_list& cases, std::size_t i, const schedule::case_record& r) {
    if (!posted_) {
      posted_ = true;
      boost::asio::post(ex_, [self = shared_from_this()] { self->flush(); });
    }
    filling_.add_case(cases, i, r);
  }

  /// Saves the artifact of case `i` (key `key`, file `file`) with outcome `r`.
  void artifact(std::size_t i, const std::string& key, std::filesystem::path file,
                const schedule::case_record& r) {
    auto text = store::result_object(r);
    text["key"] = key;
    ledger_->handed_over(1);
    auto done = [self = shared_from_this(), i, key, file](boost::system::error_code ec) {
      std::optional<failed_save> f;
      if (ec)
        f = failed_save{key, "cannot save the artifact of " + key + " to " + file.string() + ": " +
                                 ec.message()};
      boost::asio::post(self->ex_, [self, i, f = std::move(f)]() mutable {
        if (!self->ledger_) return;
        if (f)
          self->failed(std::move(*f));
        else if (self->tell_saved_)
          self->tell_saved_({&i, 1});
        self->came_back(1);
      });
    };
    artifacts_->submit(std::move(file), protocol::to_json_text(text) + "\n", std::move(done));
  }

  /// Hands what is filling to the writer (which may block while too much waits).
  void flush() {
    posted_ = false;
    if (!writer_ || filling_.empty()) return;
    auto batch = std::move(filling_);
    filling_ = store::case_batch();
    if (!spare_.empty()) {
      filling_ = std::move(spare_.back());
      spare_.pop_back();
    }
    ledger_->handed_over(batch.size());
    // On the writer's thread: one post per batch brings it and its failures back.
    writer_->submit_batch(
        std::move(batch), [self = shared_from_this()](store::case_batch back,
                                                      std::vector<store::save_failure> failed) {
          std::vector<indexed_failure> messages;
          for (auto& f : failed) {
            auto message = "cannot save the result of " + f.key + " to " + f.file.string() + ": " +
                           f.error.message();
            messages.push_back({{std::move(f.key), std::move(message)}, f.index});
          }
          std::sort(messages.begin(), messages.end(),
                    [](const auto& a, const auto& b) { return a.index < b.index; });
          auto home = self->ex_;
          boost::asio::post(
              home, [self, back = std::move(back), messages = std::move(messages)]() mutable {
                self->returned(back, messages);
              });
        });
  }

  /// Completes (on the session's executor; its error code says nothing) once every save handed
  /// over has come back: their failures and saves are told. Nothing blocks meanwhile: the
  /// writers' threads call back. Not cancellable: what is saved is waited for.
  template <class Token>
  auto async_settle(Token&& token) {
    flush();  // the last turn's records, whose hand-over may still be queued
    settled_.expires_at(ledger_->settled() ? boost::asio::steady_timer::time_point::min()
                                           : boost::asio::steady_timer::time_point::max());
    return settled_.async_wait(boost::asio::bind_cancellation_slot(boost::asio::cancellation_slot(),
                                                                   std::forward<Token>(token)));
  }

  /// The run is over: a hand-over or callback still queued does nothing, and the writers go
  /// (an artifact writer's thread ends once what it holds is written).
  void forget() {
    writer_ = nullptr;
    ledger_ = nullptr;
    artifacts_.reset();
  }

 private:
  struct indexed_failure {
    failed_save save;
    std::size_t index;  // in its batch
  };

  void came_back(std::size_t n) {
    ledger_->came_back(n);
    // Ends a wait in async_settle, or makes the next one end at once.
    if (ledger_->settled()) settled_.expires_at(boost::asio::steady_timer::time_point::min());
  }

  // A batch back from the writer: its failures told, its other cases told saved, its buffers
  // kept for another batch.
  void returned(store::case_batch& back, std::vector<indexed_failure>& failed) {
    if (!ledger_) return;
    for (auto& f : failed) this->failed(std::move(f.save));
    if (tell_saved_) {
      saved_.clear();
      for (std::size_t k = 0, next = 0; k < back.size(); ++k) {
        if (next < failed.size() && failed[next].index == k) {
          ++next;
          continue;
        }
        saved_.push_back(back.case_index(k));
      }
      if (!saved_.empty()) tell_saved_(saved_);
    }
    came_back(back.size());
    back.clear();
    // Two or three batches are in use at a time; more were made while the disk was slow.
    if (spare_.size() < 4) spare_.push_back(std::move(back));
  }

  boost::asio::any_io_executor ex_;
  run_ledger* ledger_;
  tell_failed_fn tell_failed_;
  tell_saved_fn tell_saved_;
  boost::asio::steady_timer settled_;
  store::run_store::case_writer* writer_ = nullptr;  // the run store's, when it saves records
  std::optional<store::batch_writer> artifacts_;     // session_mode::execute's
  store::case_batch filling_;
  std::vector<store::case_batch> spare_;  // batches back from the writer, for the next ones
  std::vector<std::size_t> saved_;        // the cases of a batch back, told to tell_saved_
  bool posted_ = false;                   // a hand-over of filling_ is on its way
};

}  // namespace mira::detail
