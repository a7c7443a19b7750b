// The study's request loop (see request_loop.hpp): reading requests, running cases, writing
// answers.
#include "study/request_loop.hpp"

#include "protocol/envelope.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include <mira/protocol/trajectory.hpp>
#include <mira/study/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/json/parse_options.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <thread>
#include <type_traits>

namespace mira::study::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

std::optional<std::int64_t> uint_member(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v) return std::nullopt;
  if (v->is_int64() && v->get_int64() >= 0) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= INT64_MAX)
    return static_cast<std::int64_t>(v->get_uint64());
  return std::nullopt;
}

// Lists samples [from, to) of an eval into `out` (a list's sample_list, or a page's vector);
// what a sample generator threw is the error the request is answered with (the other requests
// go on).
template <class Samples>
std::optional<protocol::rpc_error> make_samples(const eval& e, std::size_t from, std::size_t to,
                                                Samples& out) {
  auto i = from;
  std::string why;
  try {
    for (; i < to; ++i) out.push_back(e.sample_at(i).info());
    return std::nullopt;
  } catch (const std::exception& x) {
    why = x.what();
  } catch (...) {
    why = "it threw something not an exception";
  }
  return request_error(errc::sample_failed, "eval " + e.name() + ": making sample " +
                                                std::to_string(i) + " failed: " + why)
      .to_rpc();
}

// The sample a case names: the eval's own (not copied), or the one its generator makes into
// `made`.
const study::sample& sample_of(const eval& e, const protocol::case_identity& c,
                               std::optional<study::sample>& made) {
  if (auto* s = e.listed_sample(c.sample)) return *s;
  try {
    made = e.find_sample(c.sample);
  } catch (const std::exception& x) {
    throw request_error(errc::sample_failed,
                        "sample " + c.eval + "/" + c.sample + " could not be made: " + x.what());
  }
  if (!made)
    throw request_error(errc::unknown_sample, "no such sample: " + c.eval + "/" + c.sample);
  return *made;
}

// The target a case names, among its eval's (the last of that label, were it listed twice).
const protocol::target_info& target_of(const registry& study, const eval& e,
                                       const protocol::case_identity& c) {
  const protocol::target_info* target = nullptr;
  for (auto& t : study.targets_of(e))
    if (t.label == c.target) target = &t;
  if (!target)
    throw request_error(errc::unknown_target, "no such target: " + c.eval + "@" + c.target);
  return *target;
}

// The verdict of a run's scores. A transcript with an infra error is not the subject's fault:
// neither passed nor failed, and the host retries it.
void judge(protocol::run_result& rr, const protocol::transcript& t) {
  if (t.error && t.error_kind == protocol::error_kind::infra) {
    rr.scores.clear();
    rr.scores.push_back(not_applicable("infra", *t.error));
  }
  auto v = judge_scores(rr.scores);
  rr.passed = v.passed;
  rr.aggregate = v.aggregate;
}

using runs_here_fn = bool (*)(const asio::any_io_executor&);

template <class Executor>
bool runs_here(const asio::any_io_executor& ex) {
  return ex.target<Executor>()->running_in_this_thread();
}

// How to ask `ex` whether this thread runs it, for the kinds that can say: a strand (of an
// io_context's executor, or of any, as the loop makes), or an io_context's executor (work
// tracking is part of its type, and co_spawn's executor may track work). Null for the others.
runs_here_fn asker_of(const asio::any_io_executor& ex) {
  using io_executor = asio::io_context::executor_type;
  using tracked_io_executor = std::decay_t<decltype(asio::require(
      std::declval<io_executor>(), asio::execution::outstanding_work.tracked))>;
  if (ex.target<asio::strand<io_executor>>()) return runs_here<asio::strand<io_executor>>;
  if (ex.target<asio::strand<asio::any_io_executor>>())
    return runs_here<asio::strand<asio::any_io_executor>>;
  if (ex.target<io_executor>()) return runs_here<io_executor>;
  if (ex.target<tracked_io_executor>()) return runs_here<tracked_io_executor>;
  return nullptr;
}

// The executor the loop runs its subjects on: the caller's when asker_of() can ask it, else a
// strand over it, which can. The strand runs its handlers inside the caller's executor, which
// runs one at a time (serve.hpp), so it adds no concurrency; and when the caller's threads change
// with every handler (a strand over a thread_pool), only such a strand can say whether the one
// calling is a subject.
asio::any_io_executor askable(asio::any_io_executor ex) {
  if (asker_of(ex)) return ex;
  return asio::any_io_executor(asio::make_strand(ex));
}

}  // namespace

request_loop::request_loop(const registry& study, const serve_options& options,
                           asio::any_io_executor ex)
    : study_(study),
      options_(options),
      ex_(askable(std::move(ex))),
      runs_here_(asker_of(ex_)),
      table_(options.max_in_flight),
      framer_(options.max_line),
      parser_(json::storage_ptr(),
              [] {
                json::parse_options o;
                o.max_depth = 256;
                return o;
              }()),
      has_output_(ex_, asio::steady_timer::time_point::max()),
      settled_(ex_, asio::steady_timer::time_point::max()) {}

request_loop::~request_loop() {
  // Torn down with cases still in flight (the io_context destroyed under serve()): blocking
  // work waiting on its stop token is told, or the join would wait for ever.
  for (auto id : table_.ids()) table_.find(id)->ctl->request_stop();
  if (pool_) pool_->join();
}

asio::any_io_executor request_loop::blocking_executor() {
  if (!pool_) {
    auto n = options_.blocking_threads ? options_.blocking_threads
                                       : std::max(2U, std::thread::hardware_concurrency());
    pool_.emplace(n);
  }
  return pool_->get_executor();
}

void request_loop::queue(std::string_view frame) {
  if (write_error_) return;  // the host is gone: nothing more reaches it
  bool was_empty = out_.empty();
  out_ += frame;
  if (was_empty) wake(has_output_);
}

void request_loop::send(std::string frame) {
  // Notifications may come from the pool's threads; the buffer is the I/O thread's. A subject's
  // own are queued at once, so they precede its answer: a subject runs on ex_, which says so
  // whichever thread runs it.
  if (on_io_thread()) return queue(frame);
  asio::post(ex_, [this, f = std::move(frame)] { queue(f); });
}

void request_loop::answer(std::int64_t id, std::string_view result_json) {
  scratch_.clear();
  protocol::append_result_frame(scratch_, id, result_json);
  queue(scratch_);
}

void request_loop::answer_error(std::int64_t id, const protocol::rpc_error& e) {
  scratch_.clear();
  protocol::append_error_frame(scratch_, id, e);
  queue(scratch_);
}

void request_loop::answer_error(std::int64_t id, error_code code, std::string_view message,
                                bool retryable) {
  protocol::rpc_error e;
  e.code = rpc_code(code);
  e.message = std::string(message);
  e.retryable = retryable;
  answer_error(id, e);
}

void request_loop::log(std::string_view message, std::int64_t request_id) {
  protocol::log_params l;
  l.request_id = request_id;
  l.message = std::string(message);
  std::string params;
  protocol::append_json(params, l);
  scratch_.clear();
  protocol::append_notification_frame(scratch_, "log", params);
  queue(scratch_);
}

void request_loop::case_event(std::int64_t id, const protocol::case_identity& c,
                              std::string_view kind) {
  protocol::event_params e;
  e.request_id = id;
  e.eval = c.eval;
  e.sample = c.sample;
  e.target = c.target;
  e.params = c.params;
  e.kind = std::string(kind);
  std::string params;
  protocol::append_json(params, e);
  scratch_.clear();
  protocol::append_notification_frame(scratch_, "event", params);
  queue(scratch_);
}

void request_loop::drop_non_finite_metrics(std::int64_t id, const protocol::case_identity& c,
                                           protocol::transcript& t) {
  // The writer would print null, which the host refuses as a malformed result: the case's other
  // values are kept, and the metric's loss is said.
  for (auto it = t.metrics.begin(); it != t.metrics.end();) {
    if (std::isfinite(it->second)) {
      ++it;
      continue;
    }
    log("case " + c.eval + "/" + c.sample + "@" + c.target + ": metric '" + it->first + "' is " +
            (std::isnan(it->second) ? "NaN" : "infinite") + ", which JSON cannot carry: dropped",
        id);
    it = t.metrics.erase(it);
  }
}

asio::awaitable<void> request_loop::run(byte_stream& stream) {
  asio::co_spawn(ex_, write(stream), [this](std::exception_ptr e) {
    write_error_ = e;
    writer_done_ = true;
    out_.clear();
    wake(settled_);
  });
  std::exception_ptr read_error;
  try {
    co_await read(stream);
  } catch (...) {
    read_error = std::current_exception();
  }
  // From here on the loop only winds down: a cancellation of serve() itself must not cut
  // that short, or the cases still running would outlive it.
  co_await asio::this_coro::reset_cancellation_state(
      [](asio::cancellation_type) { return asio::cancellation_type::none; });
  end_of_input();
  while (!table_.empty()) co_await settled_.async_wait(asio::as_tuple(asio::use_awaitable));
  closing_ = true;
  wake(has_output_);
  while (!writer_done_) co_await settled_.async_wait(asio::as_tuple(asio::use_awaitable));
  // A cancelled serve() reads as the end of the input; a failed read or write is the caller's.
  if (read_error) {
    try {
      std::rethrow_exception(read_error);
    } catch (const boost::system::system_error& e) {
      if (e.code() != asio::error::operation_aborted) throw;
    }
  }
  if (write_error_) std::rethrow_exception(write_error_);
}

asio::awaitable<void> request_loop::read(byte_stream& stream) {
  for (;;) {
    auto space = framer_.prepare();
    auto n = co_await stream.read_some(asio::buffer(space.data(), space.size()));
    if (n == 0) break;
    framer_.commit(n);
    while (auto f = framer_.next()) {
      if (f->kind == mira::detail::line_framer::frame_kind::overlong) {
        log("a request line of " + std::to_string(f->size) + " bytes is longer than the " +
            std::to_string(framer_.max_line()) + " this study reads: skipped (" +
            mira::detail::excerpt(f->text, 80) + ")");
        continue;
      }
      on_line(f->text);
    }
  }
  if (auto f = framer_.finish()) {
    if (f->kind == mira::detail::line_framer::frame_kind::partial)
      on_line(f->text);
    else
      log("the input ended inside an overlong line: skipped");
  }
}

asio::awaitable<void> request_loop::write(byte_stream& stream) {
  std::string batch;
  for (;;) {
    if (out_.empty()) {
      if (closing_) co_return;
      co_await has_output_.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    batch.clear();
    batch.swap(out_);
    co_await stream.write(asio::buffer(batch));
  }
}

void request_loop::on_line(std::string_view line) {
  // The hot path: a `run` or `execute` read from its text, without a DOM of the line.
  if (auto env = mira::detail::classify_envelope(line);
      env && env->kind == mira::detail::envelope_kind::request && env->id) {
    auto kind = env->method == "run"       ? std::optional(method_kind::run)
                : env->method == "execute" ? std::optional(method_kind::execute)
                                           : std::nullopt;
    if (kind) {
      auto q = protocol::decode_run_params_text(env->params.empty() ? "{}" : env->params);
      if (!q) return answer_error(*env->id, errc::invalid_params, q.error().message());
      request r;
      r.kind = *kind;
      r.identity = std::move(*q);
      return admit(*env->id, std::move(r));
    }
  }
  // Everything the line parses to is decoded into typed values before this returns; a fresh
  // arena per line, on the stack for a typical request (reusing one by release() ran Boost.JSON
  // 1.81's monotonic_resource into bad_alloc after a few dozen lines).
  unsigned char first[4096];
  json::monotonic_resource arena(first, sizeof first);
  parser_.reset(json::storage_ptr(&arena));
  error_code ec;
  parser_.write(line, ec);
  if (ec) {
    log("a line that is not JSON was skipped (" + ec.message() +
        "): " + mira::detail::excerpt(line, 80));
    return;
  }
  json::value v = parser_.release();
  auto* o = v.if_object();
  if (!o) {
    log("a line that is not a JSON object was skipped: " + mira::detail::excerpt(line, 80));
    return;
  }
  auto* method = o->if_contains("method");
  auto* id = o->if_contains("id");
  if (!method) {
    // A response: this study sends no requests, so there is nothing for it to answer.
    if (id) log("a response was skipped: this study sends no requests");
    return;
  }
  if (!id || id->is_null()) return;  // a notification from the host: none is defined
  auto rid = uint_member(*o, "id");
  if (!rid) {
    log("a request whose id is not a non-negative integer was skipped: " +
        mira::detail::excerpt(line, 80));
    return;
  }
  if (!method->is_string())
    return answer_error(*rid, errc::invalid_request, "method is not a string");
  auto* params = o->if_contains("params");
  if (params && params->is_null()) params = nullptr;
  if (params && !params->is_object())
    return answer_error(*rid, errc::invalid_params, "params is not an object");
  on_request(*rid, method->get_string(), params);
}

void request_loop::on_request(std::int64_t id, std::string_view method, const json::value* params) {
  static const json::value empty = json::object();
  const json::value& p = params ? *params : empty;
  if (method == "run") return admit(id, method_kind::run, params);
  if (method == "execute") return admit(id, method_kind::execute, params);
  if (method == "score") return admit(id, method_kind::score, params);
  if (method == "initialize") {
    result_.clear();
    protocol::append_json(
        result_, study_.describe(options_.page_size, options_.cancel, options_.case_events));
    return answer(id, result_);
  }
  if (method == "list") {
    protocol::list_result l;
    for (auto& e : study_.evals()) {
      auto& info = l.evals.emplace_back(e.info());
      info.targets = study_.targets_of(e);
      auto n = std::min(e.sample_count(), options_.page_size);
      info.samples.reserve(n);
      if (auto problem = make_samples(e, 0, n, info.samples)) return answer_error(id, *problem);
      if (n < e.sample_count()) info.next_cursor = std::to_string(n);
    }
    result_.clear();
    protocol::append_json(result_, l);
    return answer(id, result_);
  }
  if (method == "list_samples") {
    auto q = protocol::decode_list_samples_params(p);
    if (!q) return answer_error(id, errc::invalid_params, q.error().message());
    auto* e = study_.find(q->eval);
    if (!e) return answer_error(id, errc::unknown_eval, "no such eval: " + q->eval);
    std::size_t from = 0;
    auto [end, ec] = std::from_chars(q->cursor.data(), q->cursor.data() + q->cursor.size(), from);
    if (ec != std::errc() || end != q->cursor.data() + q->cursor.size() || q->cursor.empty() ||
        from > e->sample_count())
      return answer_error(
          id, errc::invalid_params,
          "cursor '" + q->cursor + "' is not one this study gave for eval " + q->eval);
    protocol::list_samples_result r;
    auto to = std::min(e->sample_count(), from + options_.page_size);
    r.samples.reserve(to - from);
    if (auto problem = make_samples(*e, from, to, r.samples)) return answer_error(id, *problem);
    if (to < e->sample_count()) r.next_cursor = std::to_string(to);
    result_.clear();
    protocol::append_json(result_, r);
    return answer(id, result_);
  }
  if (method == "cancel" && options_.cancel) {
    auto q = protocol::decode_cancel_params(p);
    if (!q) return answer_error(id, errc::invalid_params, q.error().message());
    // An answered request is over, though its entry lives until its completion returns.
    auto* r = table_.find(q->id);
    bool found = r && !r->ctl->answered;
    cancel(q->id);
    return answer(id, found ? R"({"cancelled":true})" : R"({"cancelled":false})");
  }
  answer_error(id, errc::unknown_method, "unknown method: " + std::string(method));
}

void request_loop::admit(std::int64_t id, method_kind kind, const json::value* params) {
  request r;
  r.kind = kind;
  static const json::value empty = json::object();
  const json::value& p = params ? *params : empty;
  if (kind == method_kind::score) {
    auto q = protocol::decode_score_params(p);
    if (!q) return answer_error(id, errc::invalid_params, q.error().message());
    auto t = protocol::decode_transcript(json::value(q->transcript));
    if (!t) return answer_error(id, errc::invalid_params, "transcript." + t.error().message());
    r.identity = std::move(q->identity);
    r.transcript.emplace(std::move(*t));
    return admit(id, std::move(r));
  }
  auto q = protocol::decode_run_params(p);
  if (!q) return answer_error(id, errc::invalid_params, q.error().message());
  r.identity = std::move(*q);
  admit(id, std::move(r));
}

void request_loop::admit(std::int64_t id, request r) {
  r.ctl = std::make_unique<case_control>();
  if (r.identity.timeout_ms) {
    // Capped at a century, so that the sum cannot overflow the clock's nanoseconds.
    constexpr std::int64_t century_ms = std::int64_t{100} * 365 * 24 * 3600 * 1000;
    r.deadline = run_context::clock::now() +
                 std::chrono::milliseconds(std::min(*r.identity.timeout_ms, century_ms));
  }
  switch (table_.admit(id, std::move(r))) {
    case request_table<request>::admitted::start:
      return start(id);
    case request_table<request>::admitted::wait:
      return;
    case request_table<request>::admitted::duplicate:
      return answer_error(id, errc::duplicate_id,
                          "request id " + std::to_string(id) + " is already in flight");
  }
}

void request_loop::cancel(std::int64_t id) {
  std::optional<request> removed;
  switch (table_.cancel(id, &removed)) {
    case request_table<request>::cancelled::removed_waiting:
      answer_error(id, errc::cancelled, "cancelled");
      wake(settled_);
      return;
    case request_table<request>::cancelled::stop_running:
      if (auto& c = *table_.find(id)->ctl; !c.answered) c.cancel();
      return;
    case request_table<request>::cancelled::unknown:
    case request_table<request>::cancelled::already_stopping:
      return;
  }
}

void request_loop::end_of_input() {
  for (auto id : table_.ids()) cancel(id);
}

void request_loop::start(std::int64_t id) {
  auto& r = *table_.find(id);
  asio::co_spawn(
      ex_, answer(id, r),
      asio::bind_cancellation_slot(r.ctl->signal.slot(), [this, id](std::exception_ptr e) {
        if (e) failed(id, e);
        // The table's entry holds the signal this completion is bound to: it is
        // released once the completion has returned, with the others of this turn.
        done_.push_back(id);
        if (done_.size() == 1) asio::post(ex_, [this] { finished(); });
      }));
}

void request_loop::finished() {
  settling_.swap(done_);
  for (auto id : settling_)
    if (auto next = table_.finish(id)) start(*next);
  settling_.clear();
  if (table_.empty()) wake(settled_);
}

void request_loop::failed(std::int64_t id, const std::exception_ptr& e) {
  auto& r = *table_.find(id);
  auto& ctl = *r.ctl;
  ctl.answered = true;
  if (ctl.began) case_event(id, r.identity, "finished");
  bool cancelled = ctl.cancelled;
  try {
    std::rethrow_exception(e);
  } catch (const request_error& x) {
    answer_error(id, x.to_rpc());
  } catch (const std::exception& x) {
    if (cancelled)
      answer_error(id, errc::cancelled, "cancelled");
    else
      answer_error(id, errc::subject_failed, std::string("the subject failed: ") + x.what());
  } catch (...) {
    answer_error(id, cancelled ? errc::cancelled : errc::subject_failed,
                 cancelled ? "cancelled" : "the subject threw something not an exception");
  }
}

run_context request_loop::context_of(std::int64_t id, request& r, const eval& e,
                                     const study::sample& s, const protocol::target_info& target) {
  run_context ctx;
  ctx.id_ = &r.identity;
  ctx.sample_ = &s;
  ctx.target_ = &target;
  ctx.request_id_ = id;
  ctx.control_ = r.ctl.get();
  ctx.deadline_ = r.deadline;
  ctx.max_turns_ = e.info().max_turns;
  ctx.executor_ = ex_;
  ctx.loop_ = this;
  return ctx;
}

void request_loop::complete_transcript(std::int64_t id, const protocol::case_identity& c,
                                       protocol::transcript& t, run_context::clock::time_point t0) {
  if (!t.timing.duration_ms)
    t.timing.duration_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(run_context::clock::now() - t0)
            .count();
  // A trajectory the host cannot read either is reported by the host; the flat fields stand.
  protocol::project_trajectory(t);
  drop_non_finite_metrics(id, c, t);
}

// result_ is shared by every case: answer_execute and answer_run write it without suspending.
void request_loop::answer_execute(std::int64_t id, request& r, protocol::transcript t, bool skipped,
                                  bool events) {
  protocol::execute_result x;
  static_cast<protocol::case_identity&>(x) = std::move(r.identity);
  x.transcript = std::move(t);
  x.skipped = skipped;
  result_.clear();
  protocol::append_json(result_, x);
  if (events) case_event(id, x, "finished");
  answer(id, result_);
  r.ctl->answered = true;
}

void request_loop::answer_run(std::int64_t id, request& r, protocol::run_result& rr,
                              protocol::transcript& t, bool events) {
  rr.transcript = std::move(static_cast<protocol::transcript_summary&>(t));
  result_.clear();
  protocol::append_json(result_, rr);
  if (events) case_event(id, rr, "finished");
  answer(id, result_);
  r.ctl->answered = true;
}

// Plain functions do what needs no co_await: the co_awaits here (the subject, the coroutine
// scorers) are the only points a cancel reaches.
asio::awaitable<void> request_loop::answer(std::int64_t id, request& r) {
  auto& c = r.identity;
  bool events = options_.case_events && r.kind != method_kind::score;
  if (events) case_event(id, c, "started");
  r.ctl->began = events;
  auto* e = study_.find(c.eval);
  if (!e) throw request_error(errc::unknown_eval, "no such eval: " + c.eval);
  const auto& target = target_of(study_, *e, c);
  std::optional<study::sample> made;
  const study::sample* s = &sample_of(*e, c, made);

  protocol::transcript t;
  bool skipped = false;
  if (r.kind == method_kind::score) {
    t = std::move(*r.transcript);
  } else if (!target.available) {
    skipped = true;  // listed as unavailable: the host should not have asked; nothing runs
  } else {
    auto ctx = context_of(id, r, *e, *s, target);
    auto t0 = run_context::clock::now();
    try {
      t = co_await e->run_subject()(ctx);
    } catch (const infra_error& x) {
      // Not the subject's fault: answered as a result whose transcript says so.
      t = {};
      x.apply_to(t);
    }
    complete_transcript(id, c, t, t0);
  }
  if (r.kind == method_kind::execute) {
    answer_execute(id, r, std::move(t), skipped, events);
    co_return;
  }

  protocol::run_result rr;
  static_cast<protocol::case_identity&>(rr) = std::move(c);
  rr.skipped = skipped;
  if (!s->input.empty()) rr.input = s->input;
  if (s->expected) rr.expected = protocol::lazy_json<json::value>(*s->expected);
  if (!skipped) {
    if (!(t.error && t.error_kind == protocol::error_kind::infra)) {
      // Plain scorers are called, not awaited: a cancel that came after the subject's result
      // must not turn it into a cancelled answer.
      for (auto& sc : e->scorers()) {
        try {
          if (sc.is_coroutine())
            rr.scores.push_back(co_await sc.co_score(*s, t));
          else
            rr.scores.push_back(sc.score(*s, t));
        } catch (const request_error&) {
          throw;
        } catch (const infra_error& x) {
          // A scorer that could not reach its service (a judge's provider rate-limited or
          // down): the case ends as an infra error, which the host retries.
          x.apply_to(t);
          break;
        } catch (const std::exception& ex) {
          // A cancel that reached a scorer's co_await is answered as the cancel it is.
          if (r.ctl->cancelled) throw;
          throw request_error(errc::scorer_failed, "scorer " + sc.name() + " failed: " + ex.what());
        }
      }
    }
    judge(rr, t);
  }
  answer_run(id, r, rr, t, events);
}

}  // namespace mira::study::detail
