// The run pipeline (see run_plan.hpp): the scheduler's decisions turned into requests.
#include <mira/schedule/run_plan.hpp>
#include "schedule/scheduler.hpp"
#include "schedule/sequential_study.hpp"

#include "host/serial_executor.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <memory>
#include <ostream>
#include <sstream>
#include <unordered_map>

namespace mira::schedule {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {

struct attempt_outcome {
  tl::expected<protocol::run_result, error> result;
  bool timed_out = false;
};

// An execute result seen as a run result without scores: the scheduler's bookkeeping (usage,
// infra errors, skipped) is the same, and raw_json keeps the full transcript to save.
protocol::run_result unscored(protocol::execute_result e) {
  protocol::run_result r;
  r.eval = std::move(e.eval);
  r.sample = std::move(e.sample);
  r.target = std::move(e.target);
  r.params = std::move(e.params);
  r.trial = e.trial;
  r.trials = e.trials;
  r.seed = e.seed;
  r.transcript = std::move(static_cast<protocol::transcript_summary&>(e.transcript));
  r.skipped = e.skipped;
  r.raw_json = std::move(e.raw_json);
  return r;
}

// One attempt's request. Its per-attempt timeout starts when the pool hands it to a process, not
// while it waits for one with room (or for a dead study's restart).
asio::awaitable<tl::expected<protocol::run_result, error>> send(
    study_pool pool, protocol::run_params params, operation op,
    std::optional<boost::json::object> transcript, pool_request r) {
  diagnostics d;
  r.options.diag = &d;
  auto failed = [&](error_code ec) { return tl::unexpected(error{ec, std::move(d)}); };
  switch (op) {
    case operation::execute: {
      auto [ec, e] = co_await pool.execute(std::move(params), std::move(r),
                                           asio::as_tuple(asio::use_awaitable));
      if (ec) co_return failed(ec);
      co_return unscored(std::move(e));
    }
    case operation::score: {
      protocol::score_params sp;
      sp.identity = std::move(params);
      sp.transcript = std::move(*transcript);
      auto [ec, res] =
          co_await pool.score(std::move(sp), std::move(r), asio::as_tuple(asio::use_awaitable));
      if (ec) co_return failed(ec);
      co_return std::move(res);
    }
    case operation::run:
      break;
  }
  auto [ec, res] =
      co_await pool.run(std::move(params), std::move(r), asio::as_tuple(asio::use_awaitable));
  if (ec) co_return failed(ec);
  co_return std::move(res);
}

// Waits until the request was handed to a process (the timer is re-armed then), then the
// timeout. True when the timeout passed; false when the wait was cancelled (the request
// decided the race, or the attempt itself was cancelled).
asio::awaitable<bool> timeout_after_dispatch(std::shared_ptr<asio::steady_timer> timer) {
  for (;;) {
    auto [ec] = co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
    if (!ec) co_return true;
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none) co_return false;
  }
}

// The timer's side of the race won. When the timer did not fire, the attempt itself was
// cancelled (the run is stopping) and the timer's wait ended first: that is a cancellation,
// recorded as such, not a timeout that would fail the case and keep it from a resume.
void timer_won(attempt_outcome& out, bool fired) {
  if (fired)
    out.timed_out = true;
  else
    out.result = tl::unexpected(error{asio::error::operation_aborted, {}});
}

// The timeout travels with the request (`timeout_ms`, which a study that does not know it
// ignores), so that a study can plan to it: mira::study's run_context::deadline().
void announce(protocol::run_params& params, std::optional<duration> timeout) {
  if (timeout) params.timeout_ms = std::chrono::ceil<std::chrono::milliseconds>(*timeout).count();
}

asio::awaitable<attempt_outcome> one_attempt(study_pool pool, protocol::run_params params,
                                             operation op,
                                             std::optional<boost::json::object> transcript,
                                             std::optional<duration> timeout,
                                             notification_handler on_notification) {
  attempt_outcome out;
  announce(params, timeout);
  pool_request r;
  r.options.on_notification = std::move(on_notification);
  if (!timeout) {
    out.result =
        co_await send(std::move(pool), std::move(params), op, std::move(transcript), std::move(r));
    co_return out;
  }
  auto ex = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
  r.on_dispatch = [timer, ex, t = *timeout] {
    asio::dispatch(ex, [timer, t] { timer->expires_after(t); });
  };
  auto request = send(std::move(pool), std::move(params), op, std::move(transcript), std::move(r));
  auto raced = co_await (std::move(request) || timeout_after_dispatch(timer));
  if (raced.index() == 0)
    out.result = std::move(std::get<0>(raced));
  else
    timer_won(out, std::get<1>(raced));
  co_return out;
}

std::string seconds_text(duration d) {
  std::ostringstream os;
  os << std::chrono::duration<double>(d).count();
  return os.str();
}

// The cause of a retried or given-up attempt, for the case's history.
attempt_error describe(const attempt_outcome& o, const attempt_verdict& v,
                       std::optional<duration> timeout) {
  attempt_error e;
  if (o.timed_out) {
    e.cause = "timeout";
    e.message = "timed out after " + seconds_text(*timeout) + " s";
  } else if (!o.result) {
    e.cause = v.rate_limited                                ? "rate limit"
              : o.result.error().code == errc::study_exited ? "study exited"
              : is_retryable(o.result.error().code)         ? "retryable error"
                                                            : "error";
    e.message = o.result.error().message();
  } else {
    e.cause = v.rate_limited ? "rate limit" : "infra";
    e.message = o.result->transcript.error.value_or("infra error");
  }
  return e;
}

// How long abandoned requests may hold every slot with nothing running, without a case timeout.
constexpr auto starved_grace = std::chrono::seconds(30);

// The run over a pool of processes of the study (one or more), which restarts a dead one itself:
// a case whose process died is retried while the pool has one left or being started again.
class pipeline {
 public:
  pipeline(asio::any_io_executor ex, study_pool pool, const plan::plan& p, run_policy policy,
           run_hooks hooks)
      : ex_(std::move(ex)),
        pool_(std::move(pool)),
        one_process_(pool_.size() == 1),
        plan_(p),
        policy_(std::move(policy)),
        hooks_(std::move(hooks)),
        wake_(ex_) {}

  asio::awaitable<run_report> run() {
    // Cancellation of the whole operation is a request to stop, not an error: keep awaiting
    // (to drain what is in flight) and report.
    co_await asio::this_coro::throw_if_cancelled(false);
    auto cancel_state = co_await asio::this_coro::cancellation_state;
    auto t0 = clock::now();
    const auto& cases = plan_.cases;
    report_.cases.resize(std::min(cases.size(), policy_.kept_records));
    // Scheduler ids are plan indices unless a case is skipped: then the map is kept.
    bool all_available = true;
    for (std::size_t i = 0; i < cases.size() && all_available; ++i)
      all_available = cases.available(i);
    std::size_t startable = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (!cases.available(i)) {
        auto& rec = record_of(i);
        rec.state = case_state::skipped;
        rec.message = "target unavailable";
        if (hooks_.on_result) hooks_.on_result(i, rec);
        forget(i);
        continue;
      }
      ++startable;
      if (!all_available) index_of_.push_back(i);
    }
    flight_of_.resize(startable);
    sched_.emplace(
        startable,
        [this](std::size_t id) -> std::string_view { return plan_.cases.provider(index_of(id)); },
        policy_.concurrency, policy_.retry, policy_.jitter_seed.value_or(std::random_device{}()));
    deadline_ = policy_.deadline ? t0 + *policy_.deadline : time_point::max();

    for (;;) {
      // A study that ignores `cancel` still works on what we gave up on: that counts.
      auto abandoned = pool_.abandoned();
      sched_->reserve(abandoned + beyond_capacity());
      check_starved(abandoned);
      // One clock reading for next() and next_wakeup(), so both see the same due retries.
      auto now = clock::now();
      if (!sched_->stopped())
        while (auto id = sched_->next(now)) start(*id);
      if (done_.empty() && running_ == 0 && (sched_->idle() || sched_->stopped())) break;
      if (done_.empty()) {
        auto until = deadline_;
        if (auto w = sched_->next_wakeup(now); w && *w < until) until = *w;
        if (sched_->reserved() > 0) watch_abandoned(abandoned);
        if (starved_since_)
          until = std::min(until, *starved_since_ + policy_.case_timeout.value_or(starved_grace));
        wake_.expires_at(until);
        co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      if (!sched_->stopped() && cancel_state.cancelled() != asio::cancellation_type::none)
        stop(stop_reason::interrupted, "interrupted");
      if (!sched_->stopped() && clock::now() >= deadline_)
        stop(stop_reason::deadline,
             "the run deadline (" + seconds_text(*policy_.deadline) + " s) passed");
      // Swapped, not moved: both vectors keep their capacity, so outcomes are not moved again
      // by a vector growing from nothing on every batch.
      std::swap(batch_, done_);
      for (auto& [id, outcome] : batch_) finish(id, outcome);
      batch_.clear();
    }
    report_.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    report_.restarts = pool_.restarts();
    co_return std::move(report_);
  }

 private:
  std::optional<duration> timeout_for(std::size_t index) const {
    return policy_.case_timeout_for ? policy_.case_timeout_for(index) : policy_.case_timeout;
  }

  void start(std::size_t id) {
    auto index = index_of(id);
    auto& f = take_flight(id);
    f.started = clock::now();
    auto slot = f.signal.slot();
    auto seq = ++attempt_seq_;
    if (one_process_ && hooks_.on_sequential_study) sequential_.sent(seq, f.started);
    ++running_;
    if (hooks_.on_start) hooks_.on_start(index);
    if (policy_.op == operation::run && !timeout_for(index)) {
      // The common case as a plain completion handler on the strand: no coroutine frames per
      // attempt.
      request_options o;
      f.diag = {};
      o.diag = &f.diag;
      o.on_notification = notifications(index);
      pool_.run(
          plan_.cases.params(index), std::move(o),
          asio::bind_cancellation_slot(
              slot,
              asio::bind_executor(ex_, [this, id, seq](error_code ec, protocol::run_result r) {
                auto& out = done_.emplace_back(id, attempt_outcome{}).second;  // moved once
                if (ec)
                  out.result = tl::unexpected(error{ec, std::move(flights_[flight_of_[id]]->diag)});
                else
                  out.result = std::move(r);
                ended(seq, out);
              })));
      return;
    }
    std::optional<boost::json::object> transcript;
    if (policy_.op == operation::score) transcript = policy_.transcript_for(index);
    asio::co_spawn(ex_,
                   one_attempt(pool_, plan_.cases.params(index), policy_.op, std::move(transcript),
                               timeout_for(index), notifications(index)),
                   asio::bind_cancellation_slot(
                       slot, [this, id, seq](std::exception_ptr ep, attempt_outcome o) {
                         if (ep)
                           o.result = tl::unexpected(error{asio::error::operation_aborted, {}});
                         ended(seq, done_.emplace_back(id, std::move(o)).second);
                       }));
  }

  notification_handler notifications(std::size_t index) {
    if (!hooks_.on_notification) return {};
    return [this, index](const notification& n) { hooks_.on_notification(index, n); };
  }

  // An attempt's outcome, on the strand and already in done_: finished in the run loop's next
  // batch.
  void ended(std::uint64_t seq, const attempt_outcome& o) {
    if (one_process_ && hooks_.on_sequential_study) noticed(seq, o);
    --running_;
    wake_.cancel();
  }

  // Answers of the one study, in the order they came: does it work on one request at a time?
  void noticed(std::uint64_t seq, const attempt_outcome& o) {
    bool answered =
        !o.timed_out && (o.result || o.result.error().code != asio::error::operation_aborted);
    if (!answered)
      sequential_.dropped(seq);
    else if (sequential_.answered(seq, clock::now()))
      hooks_.on_sequential_study();
  }

  void finish(std::size_t id, attempt_outcome& o) {
    auto index = index_of(id);
    auto& rec = record_of(index);
    auto& f = *flights_[flight_of_[id]];
    rec.attempts = sched_->attempts(id);
    rec.latency_seconds = std::chrono::duration<double>(clock::now() - f.started).count();
    release_flight(id);
    bool aborted =
        !o.timed_out && !o.result && o.result.error().code == asio::error::operation_aborted;
    if (aborted && sched_->stopped()) {
      sched_->release(id);
      rec.state = case_state::cancelled;
      rec.message = "cancelled: " + std::string(to_string(report_.stopped));
      return report(index);
    }
    if (o.result) spend(o.result->transcript.usage);

    attempt a;
    a.result = o.result ? &*o.result : nullptr;
    a.error = o.result ? nullptr : &o.result.error();
    a.timed_out = o.timed_out;
    // A dead study: its cases are retried while the pool has a process or is starting one
    // again; otherwise every further attempt would fail the same way.
    bool fatal = a.error && is_fatal(a.error->code);
    bool recovered = fatal && !sched_->stopped() && pool_.serviceable();
    if (fatal && !recovered) {
      // The study died for good under this case: it never got a verdict, so it is not final
      // (a resume runs it), like every case the stop leaves.
      auto why = a.error->message();
      sched_->release(id);
      rec.state = case_state::cancelled;
      rec.message = "not run: " + why;
      report(index);
      stop(stop_reason::study_failed, why);
      return;
    }
    auto v = classify(a, policy_.timeout_is_infra, policy_.rate_limited, policy_.transient);
    if (recovered) v.retry = true;
    auto d = sched_->finish(id, v, clock::now());
    if (d == disposition::retry) {
      rec.retried.push_back(describe(o, v, timeout_for(index)));
      return;
    }
    bool gave_up = d == disposition::gave_up;
    // The state comes from the last attempt alone, not from the retry predicate (classify.hpp).
    rec.state =
        final_state(a, v.rate_limited, policy_.timeout_is_infra, policy_.op == operation::execute);
    if (o.timed_out) {
      rec.message = describe(o, v, timeout_for(index)).message;
    } else if (!o.result) {
      auto& e = o.result.error();
      rec.message = e.message();
    } else {
      auto& r = *o.result;
      if (r.transcript.error) rec.message = *r.transcript.error;
      rec.result_json = std::move(r.raw_json);
    }
    if (gave_up)
      rec.message = "gave up after " + std::to_string(rec.attempts) + " attempts: " + rec.message;
    const auto state = rec.state;
    report(index);  // `rec` is gone unless the report keeps it
    if (policy_.fail_fast && !sched_->stopped() &&
        (state == case_state::failed || state == case_state::error))
      stop(stop_reason::fail_fast,
           "case " + plan_.cases.key(index) + " " + std::string(to_string(state)));
  }

  // Wakes the loop when the pool's abandoned count moves from `seen` (a late answer frees a
  // slot, or a hung process was given up on). One wait at a time; `alive_` guards a completion
  // that comes after the run.
  void watch_abandoned(std::size_t seen) {
    if (watching_abandoned_) return;
    watching_abandoned_ = true;
    pool_.async_wait_abandoned(
        seen, asio::bind_executor(
                  ex_, [this, alive = std::weak_ptr<int>(alive_)](error_code, std::size_t) {
                    if (!alive.lock()) return;
                    watching_abandoned_ = false;
                    wake_.cancel();
                  }));
  }

  // Slots of the global cap the pool cannot serve (its processes that died for good): held, so
  // no attempt waits in the pool for room that never comes (its timeout only starts when a
  // process takes it).
  std::size_t beyond_capacity() const {
    auto cap = pool_.capacity();
    auto want = policy_.concurrency.max_concurrent;
    return want > cap ? want - cap : 0;
  }

  // Every slot held by requests the study never answered after `cancel`, and nothing else
  // running: after a grace period the study is treated as hung (the pool starts the processes
  // that hold them again, or the run stops).
  void check_starved(std::size_t abandoned) {
    // The scheduler's cap, not the policy's: it is at least 1.
    bool starved = running_ == 0 && sched_->held_by_reserved();
    if (!starved) {
      starved_since_.reset();
      return;
    }
    auto now = clock::now();
    if (!starved_since_) starved_since_ = now;
    auto grace = policy_.case_timeout.value_or(starved_grace);
    if (now - *starved_since_ < grace) return;
    starved_since_.reset();
    auto why = "the study never answered " + std::to_string(abandoned) +
               " cancelled request(s), which held every slot for " + seconds_text(grace) + " s (" +
               (policy_.case_timeout ? "the case timeout" : "the hang limit") +
               "): it is treated as hung";
    if (!pool_.give_up_on_hung(why)) stop(stop_reason::study_failed, why);
  }

  void spend(const protocol::usage& u) {
    cost_ += u.cost_usd;
    tokens_ += u.input_tokens + u.output_tokens;
    if (sched_->stopped()) return;
    if (policy_.max_cost_usd && cost_ > *policy_.max_cost_usd)
      stop(stop_reason::budget,
           "the cost budget ($" + std::to_string(*policy_.max_cost_usd) + ") was exceeded");
    else if (policy_.max_tokens && tokens_ > *policy_.max_tokens)
      stop(stop_reason::budget,
           "the token budget (" + std::to_string(*policy_.max_tokens) + ") was exceeded");
  }

  // No more starts; waiting cases end as cancelled ("not run: ..."), in-flight ones are
  // cancelled (the study is sent `cancel`) and end as cancelled when their abort comes back.
  // A case that never got its verdict is not an error, whatever stopped the run (a study that
  // died for good too): a resume runs it, and the stop reason tells why the run ended.
  void stop(stop_reason why, std::string message) {
    if (sched_->stopped()) return;
    report_.stopped = why;
    report_.stop_message = std::move(message);
    for (auto id : sched_->stop()) {
      auto index = index_of(id);
      auto& rec = record_of(index);
      rec.state = case_state::cancelled;
      rec.attempts = sched_->attempts(id);
      rec.message = "not run: " + report_.stop_message;
      report(index);
    }
    for (auto& f : flights_)
      if (f->busy) f->signal.emit(asio::cancellation_type::terminal);
  }

  // An attempt in flight: what its end needs. Kept in a pool as large as the most attempts
  // ever in flight at once, and reused, so an attempt allocates none of it.
  struct flight {
    asio::cancellation_signal signal;
    time_point started;
    diagnostics diag;  // filled when the request fails
    bool busy = false;
  };

  flight& take_flight(std::size_t id) {
    if (free_flights_.empty()) {
      free_flights_.push_back(static_cast<std::uint32_t>(flights_.size()));
      flights_.push_back(std::make_unique<flight>());
    }
    auto slot = free_flights_.back();
    free_flights_.pop_back();
    flight_of_[id] = slot;
    auto& f = *flights_[slot];
    f.busy = true;
    return f;
  }

  void release_flight(std::size_t id) {
    auto slot = flight_of_[id];
    flights_[slot]->busy = false;
    free_flights_.push_back(slot);
  }

  // A case's record while it runs: the report's, or one held only until the case ends.
  case_record& record_of(std::size_t index) {
    return index < report_.cases.size() ? report_.cases[index] : running_records_[index];
  }
  void forget(std::size_t index) {
    if (index >= report_.cases.size()) running_records_.erase(index);
  }

  // A case's final record to the hooks; then it is dropped unless the report keeps it.
  void report(std::size_t index) {
    auto& rec = record_of(index);
    if (hooks_.on_result) hooks_.on_result(index, rec);
    std::optional<std::string> why;
    if (hooks_.stop_after && !sched_->stopped()) why = hooks_.stop_after(index, rec);
    forget(index);
    if (why) stop(stop_reason::requested, std::move(*why));
  }

  asio::any_io_executor ex_;
  study_pool pool_;
  bool one_process_;  // the sequential-study check applies
  const plan::plan& plan_;
  run_policy policy_;
  run_hooks hooks_;
  asio::steady_timer wake_;
  std::optional<scheduler> sched_;
  std::vector<std::size_t> index_of_;  // scheduler id -> plan index; empty: the same
  std::unordered_map<std::size_t, case_record> running_records_;  // beyond the kept ones
  std::size_t index_of(std::size_t id) const { return index_of_.empty() ? id : index_of_[id]; }
  std::vector<std::unique_ptr<flight>> flights_;  // unique_ptr: a signal cannot move
  std::vector<std::uint32_t> free_flights_;
  std::vector<std::uint32_t> flight_of_;  // scheduler id -> its attempt's flight, while in one
  std::optional<time_point> starved_since_;
  bool watching_abandoned_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  std::vector<std::pair<std::size_t, attempt_outcome>> done_, batch_;
  std::size_t running_ = 0;
  std::uint64_t attempt_seq_ = 0;
  sequential_detector sequential_;
  double cost_ = 0;
  std::int64_t tokens_ = 0;
  time_point deadline_;
  run_report report_;
};

asio::awaitable<run_report> run_on_strand(asio::any_io_executor strand, study_pool pool,
                                          const plan::plan& p, run_policy policy, run_hooks hooks) {
  pipeline pl(strand, std::move(pool), p, std::move(policy), std::move(hooks));
  co_return co_await pl.run();
}

}  // namespace

asio::awaitable<run_report> run_plan(study_pool pool, const plan::plan& p, run_policy policy,
                                     run_hooks hooks) {
  // All bookkeeping on one strand: attempts complete into it, so a multi-threaded executor
  // needs no locks here.
  // An executor that already runs one handler at a time (a strand, an io_context for one
  // thread) is used as it is: a strand there would only cost.
  auto strand = mira::detail::serial_executor(co_await asio::this_coro::executor);
  co_return co_await asio::co_spawn(
      strand, run_on_strand(strand, std::move(pool), p, std::move(policy), std::move(hooks)),
      asio::use_awaitable);
}

asio::awaitable<run_report> run_plan(host_handle host, const plan::plan& p, run_policy policy,
                                     run_hooks hooks) {
  return run_plan(study_pool::adopt(std::move(host)), p, std::move(policy), std::move(hooks));
}

}  // namespace mira::schedule
