// The study pool's shell (see pool.hpp): starts and checks the processes, hands requests to
// them through pool_dispatch, restarts a process that died in its slot, and shuts all down.
#include <mira/pool.hpp>
#include "pool_dispatch.hpp"
#include "study_identity.hpp"

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <deque>
#include <limits>
#include <list>
#include <mutex>

namespace mira::detail {

namespace asio = boost::asio;

namespace {

// `n`: the slot's number (0: the one process of a pool of one).
host_options default_options(std::size_t n) {
  host_options o;
  o.log = stderr_log_sink(log_level::warning, n == 0 ? "study" : "study " + std::to_string(n));
  return o;
}

// How a process went, as error::message() says it after errc::study_exited's own text: what
// later requests of a pool with none left say, after that same text.
std::string how_it_went(const diagnostics* d) {
  if (!d) return {};
  return d->message +
         (d->exit ? (d->message.empty() ? "[" : " [") + d->exit->to_string() + "]" : std::string());
}

// A missed initialize says which limit it was, in the caller's words when it has them.
void name_limit(error& e, const std::string& name) {
  if (e.code == errc::timed_out && !name.empty()) e.diag.message += " (" + name + ")";
}

}  // namespace

struct pool_state : std::enable_shared_from_this<pool_state> {
  pool_state(asio::any_io_executor e, study_command c, pool_options o)
      : ex(std::move(e)),
        restarter(asio::make_strand(ex)),
        cmd(std::move(c)),
        opts(std::move(o)),
        dispatch(opts.processes, opts.max_in_flight_per_process),
        restarts(opts.processes, 0),
        watching(opts.processes, false),
        watch_epoch(opts.processes, 0),
        reviving(opts.processes, false),
        causes(opts.processes) {
    for (std::size_t i = 0; i < opts.processes; ++i)
      backoffs.push_back(std::make_unique<asio::steady_timer>(restarter));
  }

  // Slots are 0-based inside, numbered 1..N outside; the one process of a pool of one is 0.
  std::size_t number(std::size_t slot) const { return opts.processes == 1 ? 0 : slot + 1; }

  host_options options_for(std::size_t slot) const {
    return opts.host_options_for ? opts.host_options_for(number(slot))
                                 : default_options(number(slot));
  }

  // Whether the process of `slot` may be started again (an adopted one has no command).
  bool may_restart_locked(std::size_t slot) const {
    return !cmd.argv.empty() && restarts[slot] < opts.max_restarts;
  }

  // The process of `slot` is gone (`cause`: how, as how_it_went says it): a restart begins, or
  // the slot stays empty. True: restarted.
  bool gone_locked(std::size_t slot, const std::string& cause) {
    dispatch.set_dead(slot);
    bool again = may_restart_locked(slot);
    if (again) {
      ++restarting;
      reviving[slot] = true;
    }
    causes[slot] = cause;
    if (!serviceable_locked()) last_gone = cause;
    return again;
  }

  // After gone_locked, unlocked: on_restart told (`why`: the cause in full for a pool of one;
  // `what`: the same, short, after "study N " in a pool of several), the restart spawned.
  void after_gone(std::size_t slot, const std::string& why, const std::string& what, bool again) {
    if (opts.on_restart) {
      if (opts.processes == 1) {
        if (again) opts.on_restart(0, why);
      } else {
        opts.on_restart(slot + 1,
                        what + (again ? "; starting it again" : "; no restarts left for it"));
      }
    }
    if (again) asio::co_spawn(restarter, restart(shared_from_this(), slot), asio::detached);
  }

  // Under the lock: the abandoned counts are read now, so the choice sees the latest.
  std::optional<pool_lease> acquire_locked() {
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (dispatch.live(i)) dispatch.set_abandoned(i, hosts[i]->abandoned());
    auto slot = dispatch.pick();
    if (!slot) return std::nullopt;
    auto gen = dispatch.started(*slot);
    return pool_lease{*hosts[*slot], *slot, gen, hosts.size()};
  }

  // The most requests the processes that are live, or being restarted, can hold at once.
  std::size_t capacity_locked() const {
    if (dispatch.cap() == 0) return std::numeric_limits<std::size_t>::max();
    std::size_t n = 0;
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (dispatch.live(i) || reviving[i]) ++n;
    return n * dispatch.cap();
  }

  bool serviceable_locked() const {
    return !closed && (dispatch.live_count() > 0 || restarting > 0);
  }

  // Hands waiting requests to processes with room; fails them all when none can ever have room.
  void drain() {
    std::vector<std::pair<std::unique_ptr<pool_waiting>, pool_lease>> go;
    std::vector<std::unique_ptr<pool_waiting>> dead;
    {
      std::lock_guard lock(mutex);
      if (!serviceable_locked()) {
        for (auto& [seq, w] : waiting) dead.push_back(std::move(w));
        waiting.clear();
      } else {
        while (!waiting.empty()) {
          auto lease = acquire_locked();
          if (!lease) break;
          go.emplace_back(std::move(waiting.front().second), std::move(*lease));
          waiting.pop_front();
        }
        arm_watches_locked();
      }
    }
    for (auto& [w, lease] : go) w->dispatch(std::move(lease));
    for (auto& w : dead) w->fail(make_error_code(errc::study_exited), gone_message());
  }

  // Why the pool serves no more requests: the last process's end, in full.
  std::string gone_message() const {
    std::lock_guard lock(mutex);
    return last_gone;
  }

  std::size_t abandoned_locked() const {
    // A dead slot's process holds nothing a new request waits for (a hung one given up on
    // still counts its requests until its new process replaces it).
    std::size_t n = 0;
    for (std::size_t i = 0; i < hosts.size(); ++i)
      if (hosts[i] && dispatch.live(i)) n += hosts[i]->abandoned();
    return n;
  }

  // A process's abandoned count moves when a request is given up on or a late answer comes.
  // Each process is watched (host_handle::async_wait_abandoned, one wait at a time) while
  // someone needs to hear of it: requests waiting for room while a process is held by
  // abandoned requests (a late answer frees the room), or a caller of async_wait_abandoned.
  // A dead process is skipped: its count is 0 for good, and its finished host would answer
  // each watch at once (a spin until the slot restarts, if ever).
  void arm_watches_locked() {
    bool held = false;
    for (auto& h : hosts) held = held || (h && h->abandoned() > 0);
    if (abandoned_waiters.empty() && (waiting.empty() || !held)) return;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      if (!hosts[i] || watching[i] || !dispatch.live(i)) continue;
      watching[i] = true;
      // With requests waiting, from the count the last choice saw (acquire_locked): a late
      // answer since then (on another thread) completes the watch at once instead of being
      // missed.
      hosts[i]->async_wait_abandoned(
          waiting.empty() ? hosts[i]->abandoned() : dispatch.abandoned(i),
          [weak = weak_from_this(), i, epoch = watch_epoch[i]](error_code, std::size_t) {
            if (auto self = weak.lock()) self->on_watch(i, epoch);
          });
    }
  }

  void on_watch(std::size_t slot, std::uint64_t epoch) {
    {
      std::lock_guard lock(mutex);
      if (watch_epoch[slot] == epoch) watching[slot] = false;
    }
    notify_abandoned();
    drain();
    std::lock_guard lock(mutex);
    arm_watches_locked();
  }

  // Completes the callers of async_wait_abandoned whose count is no longer the pool's.
  void notify_abandoned() {
    std::list<abandoned_waiter> ready;
    std::size_t now = 0;
    {
      std::lock_guard lock(mutex);
      now = abandoned_locked();
      for (auto it = abandoned_waiters.begin(); it != abandoned_waiters.end();) {
        auto next = std::next(it);
        if (it->seen != now || closed) ready.splice(ready.end(), abandoned_waiters, it);
        it = next;
      }
    }
    for (auto& w : ready) complete_later(std::move(w.handler), error_code{}, now);
  }

  // Never inside the caller's call, as a host_handle does.
  void complete_later(handler_t<std::size_t> h, error_code ec, std::size_t n) {
    auto hex = asio::get_associated_executor(h, ex);
    asio::post(
        ex, asio::bind_executor(hex, [h = std::move(h), ec, n]() mutable { std::move(h)(ec, n); }));
  }

  void wait_abandoned(std::size_t seen, handler_t<std::size_t> h) {
    {
      std::lock_guard lock(mutex);
      auto now = abandoned_locked();
      if (now == seen && !closed) {
        auto key = ++abandoned_waiter_seq;
        auto slot = asio::get_associated_cancellation_slot(h);
        if (slot.is_connected())
          slot.assign([weak = weak_from_this(), key](asio::cancellation_type_t) {
            if (auto self = weak.lock()) self->drop_abandoned_waiter(key);
          });
        abandoned_waiters.push_back({key, seen, std::move(h)});
        arm_watches_locked();
        return;
      }
      seen = now;
    }
    complete_later(std::move(h), error_code{}, seen);
  }

  void drop_abandoned_waiter(std::uint64_t key) {
    std::list<abandoned_waiter> dropped;
    std::size_t now = 0;
    {
      std::lock_guard lock(mutex);
      now = abandoned_locked();
      for (auto it = abandoned_waiters.begin(); it != abandoned_waiters.end(); ++it)
        if (it->key == key) {
          dropped.splice(dropped.end(), abandoned_waiters, it);
          break;
        }
    }
    for (auto& w : dropped)
      complete_later(std::move(w.handler), asio::error::operation_aborted, now);
  }

  void enqueue(std::unique_ptr<pool_waiting> w) {
    std::optional<pool_lease> lease;
    std::uint64_t seq = 0;
    {
      std::lock_guard lock(mutex);
      if (serviceable_locked()) {
        lease = acquire_locked();
        if (!lease) {
          seq = ++next_seq;
          // The handler is type-erased already: the slot is the erased handler's own.
          auto slot = w->cancellation_slot();
          if (slot.is_connected())
            slot.assign(
                [weak = weak_from_this(), seq, flag = w->cancelled](asio::cancellation_type_t) {
                  flag->store(true);
                  if (auto self = weak.lock()) self->cancel_waiting(seq);
                });
          waiting.emplace_back(seq, std::move(w));
          arm_watches_locked();
          return;
        }
      }
    }
    if (lease) return w->dispatch(std::move(*lease));
    w->fail(make_error_code(errc::study_exited), gone_message());
  }

  void cancel_waiting(std::uint64_t seq) {
    std::unique_ptr<pool_waiting> w;
    {
      std::lock_guard lock(mutex);
      for (auto it = waiting.begin(); it != waiting.end(); ++it)
        if (it->first == seq) {
          w = std::move(it->second);
          waiting.erase(it);
          break;
        }
    }
    if (w) w->fail(asio::error::operation_aborted, {});
  }

  void release(const pool_lease& lease, error_code ec, diagnostics* diag) {
    bool died = false;
    bool waiters = false, again = false;
    std::string why;
    {
      std::lock_guard lock(mutex);
      dispatch.finished(lease.slot, lease.generation);
      waiters = !waiting.empty();
      if (ec == errc::study_exited && dispatch.live(lease.slot) &&
          dispatch.generation(lease.slot) == lease.generation && !closed) {
        died = true;
        again = gone_locked(lease.slot, how_it_went(diag));
        if (again && opts.processes == 1) why = error{ec, diag ? *diag : diagnostics{}}.message();
      }
    }
    if (ec && diag && lease.pool_size > 1) diag->message = of_slot(lease.slot + 1, diag->message);
    if (died) {
      std::string how = diag && diag->exit ? diag->exit->to_string() : "its connection closed";
      after_gone(lease.slot, why, "died (" + how + ")", again);
    }
    // The common case, nothing waiting and nothing died, takes no second look.
    if (waiters || died) drain();
  }

  bool give_up_on_hung(const std::string& why) {
    std::vector<std::pair<std::size_t, bool>> given_up;  // slot, restarted
    bool serviceable = false;
    {
      std::lock_guard lock(mutex);
      if (closed) return false;
      for (std::size_t i = 0; i < hosts.size(); ++i)
        if (dispatch.live(i) && hosts[i]->abandoned() > 0)
          given_up.emplace_back(i, gone_locked(i, why));
      serviceable = serviceable_locked();
    }
    for (auto& [slot, again] : given_up) after_gone(slot, why, "was given up on: " + why, again);
    notify_abandoned();  // the given-up processes' requests no longer count
    drain();
    return serviceable;
  }

  static asio::awaitable<void> restart(std::shared_ptr<pool_state> self, std::size_t slot) {
    for (;;) {
      int n = 0;
      {
        std::lock_guard lock(self->mutex);
        n = self->restarts[slot]++;
      }
      auto& backoff = *self->backoffs[slot];
      backoff.expires_after(self->opts.restart_backoff * (1 << std::min(n, 10)));
      co_await backoff.async_wait(asio::as_tuple(asio::use_awaitable));
      tl::expected<host_handle, error> started =
          tl::unexpected(error{asio::error::operation_aborted, {}});
      if (!self->is_closed()) {
        started = co_await restart_study(self->cmd, self->options_for(slot), self->init,
                                         self->opts.init_timeout);
        if (!started) name_limit(started.error(), self->opts.init_timeout_name);
      }
      bool more = false;
      {
        std::lock_guard lock(self->mutex);
        if (started && !self->closed) {
          self->hosts[slot] = std::move(*started);
          // The old process's watch may never complete (a process that is gone drops it).
          ++self->watch_epoch[slot];
          self->watching[slot] = false;
          self->dispatch.set_live(slot);
          self->reviving[slot] = false;
          --self->restarting;
        } else {
          // Another study answering is not a passing fault: no further tries.
          more = !self->closed && started.error().code != errc::incompatible_protocol &&
                 self->may_restart_locked(slot);
          if (!more) {
            self->reviving[slot] = false;
            --self->restarting;
            if (!started && !self->serviceable_locked())
              self->last_gone =
                  self->causes[slot] + "; restarting it failed: " + started.error().message();
          }
        }
      }
      if (!started && self->opts.on_restart && self->opts.processes > 1 && !self->is_closed())
        self->opts.on_restart(slot + 1, "could not be started again: " + started.error().message());
      if (!more) break;
    }
    self->notify_abandoned();
    self->drain();
  }

  bool is_closed() const {
    std::lock_guard lock(mutex);
    return closed;
  }

  // Once closed: a restart waiting out its backoff ends now, not when the backoff would. Should
  // the post fail (out of memory), the backoff runs out and the restart then finds the pool
  // closed: later, still correct, so a pool's end never throws.
  void stop_restarts() noexcept {
    try {
      asio::post(restarter, [self = shared_from_this()] {
        for (auto& t : self->backoffs) t->cancel();
      });
    } catch (...) {
    }
  }

  // Initializes every host at once, the timeout as each request's deadline; each answer (or
  // the timeout) is that host's entry. Gathered by a ranged parallel group, as shutdown() is:
  // safe whichever threads run the completions, and every one has run when it returns.
  static asio::awaitable<std::vector<tl::expected<protocol::initialize_result, error>>>
  initialize_all(std::vector<host_handle> hosts, std::chrono::milliseconds timeout) {
    std::vector<tl::expected<protocol::initialize_result, error>> results;
    if (hosts.empty()) co_return results;
    std::vector<diagnostics> diags(hosts.size());
    auto deadline = std::chrono::steady_clock::now() + timeout;
    using op_t = decltype(hosts.front().initialize(request_options{}, asio::deferred));
    std::vector<op_t> ops;
    ops.reserve(hosts.size());
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      request_options o;
      o.diag = &diags[i];
      o.deadline = deadline;
      ops.push_back(hosts[i].initialize(std::move(o), asio::deferred));
    }
    auto [order, ecs, answers] =
        co_await asio::experimental::make_parallel_group(std::move(ops))
            .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      if (ecs[i] == errc::timed_out) {
        error e{make_error_code(errc::timed_out), {}};
        e.diag.message = missed_initialize(timeout);
        results.emplace_back(tl::unexpected(std::move(e)));
      } else if (ecs[i]) {
        results.emplace_back(tl::unexpected(error{ecs[i], std::move(diags[i])}));
      } else {
        results.emplace_back(std::move(answers[i]));
      }
    }
    co_return results;
  }

  // How process `b` differs from process `a` (1-based numbers), if it does. The protocol
  // major needs no comparison: initialize already refused any other than the host's.
  static std::optional<error> difference(const protocol::initialize_result& a,
                                         const protocol::initialize_result& b, std::size_t na,
                                         std::size_t nb) {
    const char* what = a.study != b.study                   ? "study name"
                       : a.study_version != b.study_version ? "study version"
                                                            : nullptr;
    if (!what) return std::nullopt;
    error e{make_error_code(errc::incompatible_protocol), {}};
    e.diag.message = "the pool's processes differ in " + std::string(what) + ": study " +
                     std::to_string(na) + " is " + identity_of(a) + ", study " +
                     std::to_string(nb) + " is " + identity_of(b);
    return e;
  }

  // A message about process `n` (1-based) of a pool.
  static std::string of_slot(std::size_t n, const std::string& message) {
    return "study " + std::to_string(n) + (message.empty() ? "" : ": " + message);
  }

  asio::any_io_executor ex;
  // Restarts run here, one step at a time, with their backoff timers (one per slot).
  asio::strand<asio::any_io_executor> restarter;
  std::vector<std::unique_ptr<asio::steady_timer>> backoffs;
  study_command cmd;
  pool_options opts;
  protocol::initialize_result init;
  mutable std::mutex mutex;
  pool_dispatch dispatch;
  std::vector<std::optional<host_handle>> hosts;
  std::vector<int> restarts;  // per slot
  std::size_t restarting = 0;
  bool closed = false;
  std::deque<std::pair<std::uint64_t, std::unique_ptr<pool_waiting>>> waiting;
  std::uint64_t next_seq = 0;
  std::vector<bool> watching;              // per slot: a watch of its abandoned count is armed
  std::vector<std::uint64_t> watch_epoch;  // per slot: which process a watch belongs to
  std::vector<bool> reviving;              // per slot: dead, and a restart of it is under way
  std::vector<std::string> causes;         // per slot: how its last process went
  std::string last_gone;                   // how the last process went, once none is left
  struct abandoned_waiter {
    std::uint64_t key = 0;
    std::size_t seen = 0;
    handler_t<std::size_t> handler;
  };
  // Callers of async_wait_abandoned. A list: Boost 1.81's any_completion_handler recurses
  // without end when move-assigned, which erasing from a vector does.
  std::list<abandoned_waiter> abandoned_waiters;
  std::uint64_t abandoned_waiter_seq = 0;
};

// Owned by every copy of a study_pool: its end kills the processes (the state itself may live
// on in handlers of requests still completing).
struct pool_ref {
  explicit pool_ref(pool_state_ptr s) : state(std::move(s)) {}
  pool_ref(const pool_ref&) = delete;
  pool_ref& operator=(const pool_ref&) = delete;
  ~pool_ref() {
    std::vector<std::optional<host_handle>> hosts;
    std::deque<std::pair<std::uint64_t, std::unique_ptr<pool_waiting>>> waiting;
    std::list<pool_state::abandoned_waiter> waiters;
    {
      std::lock_guard lock(state->mutex);
      state->closed = true;
      hosts = std::move(state->hosts);
      state->hosts.clear();
      waiting = std::move(state->waiting);
      state->waiting.clear();
      // Dropped without running, as a host_handle's end drops its waiters.
      waiters.swap(state->abandoned_waiters);
    }
    for (auto& [seq, w] : waiting) w->fail(asio::error::operation_aborted, {});
    state->stop_restarts();
  }
  pool_state_ptr state;
};

std::optional<pool_lease> pool_acquire(const pool_state_ptr& s) {
  std::lock_guard lock(s->mutex);
  if (!s->serviceable_locked() || !s->waiting.empty()) return std::nullopt;
  return s->acquire_locked();
}

void start_pool_wait_abandoned(const pool_state_ptr& s, std::size_t seen,
                               handler_t<std::size_t> h) {
  s->wait_abandoned(seen, std::move(h));
}

void pool_release(const pool_state_ptr& s, const pool_lease& lease, error_code ec,
                  diagnostics* diag) {
  s->release(lease, ec, diag);
}

void pool_enqueue(const pool_state_ptr& s, std::unique_ptr<pool_waiting> w) {
  s->enqueue(std::move(w));
}

asio::any_io_executor pool_executor(const pool_state_ptr& s) {
  return s->ex;
}

void start_pool_list_all(const pool_state_ptr& s, request_options o,
                         handler_t<protocol::list_result> h) {
  std::optional<host_handle> host;
  {
    std::lock_guard lock(s->mutex);
    for (std::size_t i = 0; i < s->hosts.size() && !host; ++i)
      if (s->dispatch.live(i)) host = *s->hosts[i];
  }
  if (host) return host->list_all(std::move(o), std::move(h));
  // Never inline: this runs inside the initiating call.
  asio::post(s->ex, asio::append(std::move(h), make_error_code(errc::study_exited),
                                 protocol::list_result{}));
}

namespace {

// Closes the pool, fails the requests waiting in it, and shuts every process down at once (each
// may wait its grace periods), gathered by a ranged parallel group: safe whichever threads run
// the completions. operation_aborted when that wait was cancelled.
asio::awaitable<error_code> shutdown_all(pool_state_ptr s) {
  std::vector<host_handle> hosts;
  std::deque<std::pair<std::uint64_t, std::unique_ptr<pool_waiting>>> waiting;
  {
    std::lock_guard lock(s->mutex);
    s->closed = true;
    for (auto& h : s->hosts) hosts.push_back(*h);
    waiting = std::move(s->waiting);
    s->waiting.clear();
  }
  for (auto& [seq, w] : waiting) w->fail(make_error_code(errc::study_exited), {});
  s->stop_restarts();
  s->notify_abandoned();
  using op_t = decltype(hosts.front().shutdown(asio::deferred));
  std::vector<op_t> ops;
  ops.reserve(hosts.size());
  for (auto& h : hosts) ops.push_back(h.shutdown(asio::deferred));
  if (ops.empty()) co_return error_code{};
  co_await asio::experimental::make_parallel_group(std::move(ops))
      .async_wait(asio::experimental::wait_for_all(), asio::as_tuple(asio::use_awaitable));
  auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none) co_return asio::error::operation_aborted;
  co_return error_code{};
}

}  // namespace

void start_pool_shutdown(const pool_state_ptr& s,
                         asio::any_completion_handler<void(error_code)> h) {
  // The handler's slot reaches the coroutine (terminal cancellation, co_spawn's default); the
  // handler runs on its own executor, posted through the pool's.
  auto slot = asio::get_associated_cancellation_slot(h);
  asio::co_spawn(
      s->ex, shutdown_all(s),
      asio::bind_cancellation_slot(
          slot, [ex = s->ex, h = std::move(h)](std::exception_ptr ep, error_code ec) mutable {
            if (ep) ec = asio::error::operation_aborted;
            asio::post(ex, asio::append(std::move(h), ec));
          }));
}

}  // namespace mira::detail

namespace mira {

namespace asio = boost::asio;

study_pool::study_pool(std::shared_ptr<detail::pool_ref> ref) : ref_(std::move(ref)) {}

const detail::pool_state_ptr& study_pool::state() const {
  return ref_->state;
}

asio::awaitable<tl::expected<study_pool, error>> study_pool::start(executor_type ex,
                                                                   study_command cmd,
                                                                   pool_options opts) {
  if (opts.processes == 0) opts.processes = 1;
  auto s = std::make_shared<detail::pool_state>(ex, std::move(cmd), std::move(opts));
  auto n = s->opts.processes;
  // All spawned first, so their start-up (interpreters, imports) overlaps.
  std::vector<host_handle> hosts;
  for (std::size_t i = 0; i < n; ++i) {
    auto h = host_handle::spawn(ex, s->cmd, s->options_for(i));
    if (!h) co_return tl::unexpected(std::move(h.error()));
    hosts.push_back(std::move(*h));
  }
  auto inits = co_await detail::pool_state::initialize_all(hosts, s->opts.init_timeout);
  for (std::size_t i = 0; i < n; ++i)
    if (!inits[i]) {
      auto e = std::move(inits[i].error());
      if (n > 1)
        e.diag.message = detail::pool_state::of_slot(i + 1, e.diag.message);
      else if (e.code == errc::timed_out)
        e.diag.message = "the study " + e.diag.message;
      detail::name_limit(e, s->opts.init_timeout_name);
      co_return tl::unexpected(std::move(e));
    }
  for (std::size_t i = 1; i < n; ++i)
    if (auto diff = detail::pool_state::difference(*inits[0], *inits[i], 1, i + 1))
      co_return tl::unexpected(std::move(*diff));
  s->init = *inits[0];
  for (auto& h : hosts) s->hosts.emplace_back(std::move(h));
  co_return study_pool(std::make_shared<detail::pool_ref>(std::move(s)));
}

study_pool study_pool::adopt(host_handle host) {
  pool_options o;
  o.max_restarts = 0;
  auto s = std::make_shared<detail::pool_state>(host.get_executor(), study_command{}, std::move(o));
  s->init = host.study().value_or(protocol::initialize_result{});
  s->hosts.emplace_back(std::move(host));
  return study_pool(std::make_shared<detail::pool_ref>(std::move(s)));
}

bool study_pool::give_up_on_hung(const std::string& why) {
  return state()->give_up_on_hung(why);
}

study_pool::executor_type study_pool::get_executor() const {
  return state()->ex;
}

const protocol::initialize_result& study_pool::study() const {
  return state()->init;
}

std::size_t study_pool::size() const {
  return state()->opts.processes;
}

std::size_t study_pool::live() const {
  std::lock_guard lock(state()->mutex);
  return state()->dispatch.live_count();
}

std::size_t study_pool::capacity() const {
  std::lock_guard lock(state()->mutex);
  return state()->capacity_locked();
}

bool study_pool::serviceable() const {
  std::lock_guard lock(state()->mutex);
  return state()->serviceable_locked();
}

int study_pool::restarts() const {
  std::lock_guard lock(state()->mutex);
  int n = 0;
  for (auto r : state()->restarts) n += r;
  return n;
}

std::size_t study_pool::abandoned() const {
  std::lock_guard lock(state()->mutex);
  return state()->abandoned_locked();
}

std::vector<std::size_t> study_pool::loads() const {
  std::lock_guard lock(state()->mutex);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < state()->hosts.size(); ++i)
    out.push_back(state()->dispatch.in_flight(i) + state()->hosts[i]->abandoned());
  return out;
}

host_handle study_pool::process(std::size_t slot) const {
  std::lock_guard lock(state()->mutex);
  return *state()->hosts.at(slot);
}

}  // namespace mira
