// Completion tokens that give a mira operation's outcome as a tl::expected<T, mira::error>, the
// error carrying the operation's diagnostics (the study's error object, exit status, stderr
// tail):
//   - mira::use_expected, the default token of host_handle's and study_pool's operations:
//     `co_await host.run(c)` gives tl::expected<run_result, error> and never throws;
//   - mira::as_expected(token): an adapter for any other token. The operation completes with
//     `void(error_code, tl::expected<T, error>)`: the leading code is what parallel_group's
//     wait_for_one_error (and fail_when) look at, the expected what the caller reads.
// For a mira operation the adapter points the request's options at diagnostics of its own,
// unless the caller set request_options::diag (then that one is filled too and copied into the
// error). For any other `void(error_code[, T])` operation the error has the code alone.
#pragma once

#include <mira/error.hpp>

#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <tl/expected.hpp>

#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

namespace mira {

/// The token as_expected() makes.
template <class Token>
struct as_expected_t {
  Token token;
};

/// `token`, completed with `void(error_code, tl::expected<T, error>)` instead of
/// `void(error_code, T)` (`tl::expected<void, error>` for `void(error_code)`).
template <class Token>
as_expected_t<std::decay_t<Token>> as_expected(Token&& token) {
  return {std::forward<Token>(token)};
}

/// The default completion token of host_handle's and study_pool's operations: an awaitable
/// giving tl::expected<T, error> (what as_expected(use_awaitable) would give without the
/// throw on the leading code).
struct use_expected_t {};
inline constexpr use_expected_t use_expected{};

namespace detail {

// A mira operation's options (request_options, or pool_request's): their diag is where the
// operation writes; `d` becomes the caller's own one when set.
template <class Arg>
void use_diagnostics(Arg& a, diagnostics*& d) {
  if constexpr (requires {
                  { a.diag } -> std::same_as<diagnostics*&>;
                }) {
    if (a.diag)
      d = a.diag;
    else
      a.diag = d;
  } else if constexpr (requires {
                         { a.options.diag } -> std::same_as<diagnostics*&>;
                       }) {
    use_diagnostics(a.options, d);
  }
}

template <class Handler, class T, bool LeadingCode>
struct expected_handler {
  Handler handler;
  std::unique_ptr<diagnostics> owned;  // heap, so that moves of this handler keep it in place
  diagnostics* diag = nullptr;         // owned, or the caller's own

  template <class... V>
  void operator()(error_code ec, V&&... v) {
    auto out = ec ? tl::expected<T, error>(tl::unexpect, error{ec, take_diagnostics()})
                  : tl::expected<T, error>(std::forward<V>(v)...);
    if constexpr (LeadingCode)
      std::move(handler)(ec, std::move(out));
    else
      std::move(handler)(std::move(out));
  }

 private:
  diagnostics take_diagnostics() {
    if (owned) return std::move(*owned);
    return diag ? *diag : diagnostics{};  // the caller's: left as the operation filled it
  }
};

template <class Initiation, class T, bool LeadingCode>
struct expected_initiation {
  Initiation initiation;

  template <class Handler, class... Args>
  void operator()(Handler&& handler, Args&&... args) {
    auto owned = std::make_unique<diagnostics>();
    diagnostics* d = owned.get();
    (use_diagnostics(args, d), ...);
    if (d != owned.get()) owned.reset();
    std::move(initiation)(
        expected_handler<std::decay_t<Handler>, T, LeadingCode>{std::forward<Handler>(handler),
                                                                std::move(owned), d},
        std::forward<Args>(args)...);
  }
};

template <class Initiation, class T, bool LeadingCode>
auto make_expected_initiation(Initiation&& i) {
  return expected_initiation<std::decay_t<Initiation>, T, LeadingCode>{std::forward<Initiation>(i)};
}

}  // namespace detail

}  // namespace mira

/// @cond
// The executor, cancellation slot and allocator are the wrapped handler's: a cancellation
// reaches the operation as if the adapter were not there.
template <template <class, class> class Associator, class Handler, class T, bool LeadingCode,
          class DefaultCandidate>
struct boost::asio::associator<Associator, mira::detail::expected_handler<Handler, T, LeadingCode>,
                               DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const mira::detail::expected_handler<Handler, T, LeadingCode>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler);
  }
  static auto get(const mira::detail::expected_handler<Handler, T, LeadingCode>& h,
                  const DefaultCandidate& c) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler, c);
  }
};

template <class Token, class T>
struct boost::asio::async_result<mira::as_expected_t<Token>, void(mira::error_code, T)> {
  template <class Initiation, class RawToken, class... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
    return boost::asio::async_initiate<Token, void(mira::error_code, tl::expected<T, mira::error>)>(
        mira::detail::make_expected_initiation<Initiation, T, true>(
            std::forward<Initiation>(initiation)),
        token.token, std::forward<Args>(args)...);
  }
};

template <class Token>
struct boost::asio::async_result<mira::as_expected_t<Token>, void(mira::error_code)> {
  template <class Initiation, class RawToken, class... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
    return boost::asio::async_initiate<Token,
                                       void(mira::error_code, tl::expected<void, mira::error>)>(
        mira::detail::make_expected_initiation<Initiation, void, true>(
            std::forward<Initiation>(initiation)),
        token.token, std::forward<Args>(args)...);
  }
};

template <class T>
struct boost::asio::async_result<mira::use_expected_t, void(mira::error_code, T)> {
  template <class Initiation, class RawToken, class... Args>
  static auto initiate(Initiation&& initiation, RawToken&&, Args&&... args) {
    boost::asio::use_awaitable_t<> token;
    return boost::asio::async_initiate<boost::asio::use_awaitable_t<>,
                                       void(tl::expected<T, mira::error>)>(
        mira::detail::make_expected_initiation<Initiation, T, false>(
            std::forward<Initiation>(initiation)),
        token, std::forward<Args>(args)...);
  }
};

template <>
struct boost::asio::async_result<mira::use_expected_t, void(mira::error_code)> {
  template <class Initiation, class RawToken, class... Args>
  static auto initiate(Initiation&& initiation, RawToken&&, Args&&... args) {
    boost::asio::use_awaitable_t<> token;
    return boost::asio::async_initiate<boost::asio::use_awaitable_t<>,
                                       void(tl::expected<void, mira::error>)>(
        mira::detail::make_expected_initiation<Initiation, void, false>(
            std::forward<Initiation>(initiation)),
        token, std::forward<Args>(args)...);
  }
};
/// @endcond
