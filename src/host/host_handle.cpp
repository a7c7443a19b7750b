// host_handle's own members: spawn and connect, the accessors, and restart_study.
#include "host_impl.hpp"
#include "study_identity.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>

namespace mira::detail {

// Owned by every copy of a host_handle; its end is the end of the host.
struct host_ref {
  explicit host_ref(impl_ptr p) : impl(std::move(p)) {}
  host_ref(const host_ref&) = delete;
  host_ref& operator=(const host_ref&) = delete;
  impl_ptr impl;
  // Only bad_alloc can escape post(), and terminating is the one answer to it here.
  ~host_ref() {  // NOLINT(bugprone-exception-escape)
    auto strand = impl->strand_;
    asio::post(strand, [impl = std::move(impl)] { impl->release(); });
  }
};

void start_wait_abandoned(const impl_ptr& impl, std::size_t seen, handler_t<std::size_t> h) {
  // The slot is taken here, on the caller's thread, as request() does: a cancellation emitted
  // right after this call must find it. Its drop reaches the strand behind the wait itself.
  auto key = impl->next_waiter_key_.fetch_add(1);
  auto slot = asio::get_associated_cancellation_slot(h);
  if (slot.is_connected()) {
    slot.assign([w = std::weak_ptr<host_impl>(impl), key](asio::cancellation_type_t) {
      if (auto self = w.lock())
        asio::post(self->strand_, [self, key] { self->drop_abandoned_waiter(key); });
    });
  }
  asio::dispatch(impl->strand_, [impl, seen, key, h = std::move(h)]() mutable {
    impl->wait_abandoned(seen, key, std::move(h));
  });
}

}  // namespace mira::detail

namespace mira {

namespace asio = boost::asio;

asio::io_context* detail::io_context_of(const asio::any_io_executor& ex) noexcept {
  auto* e = ex.target<asio::io_context::executor_type>();
  return e ? &asio::query(*e, asio::execution::context) : nullptr;
}

host_handle::host_handle(executor_type ex, std::unique_ptr<detail::transport> io,
                         host_options opts) {
  auto impl =
      std::make_shared<detail::host_impl>(std::move(ex), std::move(io), nullptr, std::move(opts));
  impl->start();
  ref_ = std::make_shared<detail::host_ref>(std::move(impl));
}

host_handle::host_handle(std::shared_ptr<detail::host_ref> ref) : ref_(std::move(ref)) {}

tl::expected<host_handle, error> host_handle::spawn(executor_type ex, study_command cmd,
                                                    host_options opts) {
  // Writing to a study that died must be an error on that write, not the death of the host.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
    std::signal(SIGPIPE, SIG_IGN);
  auto s = detail::spawn_study(ex, cmd);
  if (!s) return tl::make_unexpected(std::move(s.error()));
  auto impl = std::make_shared<detail::host_impl>(std::move(ex), std::move(s->io),
                                                  std::move(s->process), std::move(opts));
  impl->start();
  return host_handle(std::make_shared<detail::host_ref>(std::move(impl)));
}

const detail::impl_ptr& host_handle::impl() const {
  return ref_->impl;
}

host_handle::executor_type host_handle::get_executor() const {
  return impl()->strand_.get_inner_executor();
}

std::optional<protocol::initialize_result> host_handle::study() const {
  return impl()->initialized();
}

std::size_t host_handle::abandoned() const {
  return impl()->abandoned_.load();
}

asio::awaitable<tl::expected<host_handle, error>> restart_study(
    study_command cmd, host_options options, protocol::initialize_result original,
    std::chrono::milliseconds init_timeout) {
  auto host = host_handle::spawn(co_await asio::this_coro::executor, cmd, std::move(options));
  if (!host) co_return tl::unexpected(host.error());
  // The first start's time limit: a restarted study that never answers must not hold the run.
  diagnostics d;
  request_options o;
  o.diag = &d;
  o.deadline = std::chrono::steady_clock::now() + init_timeout;
  auto [ec, init] = co_await host->initialize(std::move(o), asio::as_tuple(asio::use_awaitable));
  if (ec == errc::timed_out)
    d.message = "the restarted study " + detail::missed_initialize(init_timeout);
  if (ec) co_return tl::unexpected(error{ec, std::move(d)});
  if (init.study != original.study || init.study_version != original.study_version) {
    error e{make_error_code(errc::incompatible_protocol), {}};
    e.diag.message = "the restarted study is " + detail::identity_of(init) + ", not " +
                     detail::identity_of(original);
    co_return tl::unexpected(std::move(e));
  }
  co_return std::move(*host);
}

}  // namespace mira