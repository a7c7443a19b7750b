// mira::fail_when: a completion token adapter that makes a parallel group fail fast on a case's
// outcome, not only on an error.
//
// asio::experimental::wait_for_one_error() looks at an operation's leading error_code alone. A
// case whose result is bad (an infrastructure error the study reported in its transcript, a
// failed score) completes with no error, so its siblings run to the end. Wrapped in
// fail_when(predicate, token), an operation completing with
// `void(error_code, tl::expected<T, mira::error>)` (any operation of host_handle or study_pool
// through mira::as_expected) completes with errc::rejected_outcome as its leading code when
// `predicate(expected)` is true; the expected still holds the result.
//
//   auto op = host.run(c, mira::as_expected(mira::fail_when(mira::infra_failure,
//                                                          asio::deferred)));
//
// The executor, cancellation slot and allocator are the wrapped handler's. run_policy::fail_fast
// is the pipeline's own rule (docs/cancellation.md compares the two).
#pragma once

#include <mira/error.hpp>
#include <mira/protocol/types.hpp>

#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <tl/expected.hpp>

#include <type_traits>
#include <utility>

namespace mira {

/// The token fail_when() makes.
template <class Predicate, class Token>
struct fail_when_t {
  Predicate predicate;
  Token token;
};

/// `token`, with the leading error_code set to errc::rejected_outcome when `predicate` is true
/// of the operation's `tl::expected<T, error>`.
template <class Predicate, class Token>
fail_when_t<Predicate, std::decay_t<Token>> fail_when(Predicate predicate, Token&& token) {
  return {std::move(predicate), std::forward<Token>(token)};
}

/// An infrastructure failure: the study flagged its error `retryable`, the study went away, or
/// the result's transcript has `error_kind: infra` (a provider outage; the case scores N/A).
struct infra_failure_t {
  template <class T>
  bool operator()(const tl::expected<T, error>& r) const {
    if (!r) return is_retryable(r.error().code) || r.error().code == errc::study_exited;
    if constexpr (requires { r->transcript.error_kind; })
      return r->transcript.error_kind == protocol::error_kind::infra;
    return false;
  }
};
inline constexpr infra_failure_t infra_failure{};

/// Anything but a pass: every error, and a run result that did not pass and is neither N/A
/// nor skipped.
struct not_passed_t {
  template <class T>
  bool operator()(const tl::expected<T, error>& r) const {
    if (!r) return true;
    if constexpr (std::is_same_v<T, protocol::run_result>)
      return !r->passed && !r->skipped && !r->is_na();
    return false;
  }
};
inline constexpr not_passed_t not_passed{};

namespace detail {

template <class Predicate, class Handler>
struct fail_when_handler {
  Predicate predicate;
  Handler handler;

  template <class T>
  void operator()(error_code ec, tl::expected<T, error> r) {
    if (!ec && predicate(std::as_const(r))) ec = make_error_code(errc::rejected_outcome);
    std::move(handler)(ec, std::move(r));
  }
};

template <class Initiation, class Predicate>
struct fail_when_initiation {
  Initiation initiation;
  Predicate predicate;

  template <class Handler, class... Args>
  void operator()(Handler&& handler, Args&&... args) {
    std::move(initiation)(
        fail_when_handler<Predicate, std::decay_t<Handler>>{std::move(predicate),
                                                            std::forward<Handler>(handler)},
        std::forward<Args>(args)...);
  }
};

}  // namespace detail

}  // namespace mira

/// @cond
template <template <class, class> class Associator, class Predicate, class Handler,
          class DefaultCandidate>
struct boost::asio::associator<Associator, mira::detail::fail_when_handler<Predicate, Handler>,
                               DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const mira::detail::fail_when_handler<Predicate, Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler);
  }
  static auto get(const mira::detail::fail_when_handler<Predicate, Handler>& h,
                  const DefaultCandidate& c) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler, c);
  }
};

template <class Predicate, class Token, class... Signatures>
struct boost::asio::async_result<mira::fail_when_t<Predicate, Token>, Signatures...> {
  template <class Initiation, class RawToken, class... Args>
  static auto initiate(Initiation&& initiation, RawToken&& token, Args&&... args) {
    return boost::asio::async_initiate<Token, Signatures...>(
        mira::detail::fail_when_initiation<std::decay_t<Initiation>, Predicate>{
            std::forward<Initiation>(initiation), token.predicate},
        token.token, std::forward<Args>(args)...);
  }
};
/// @endcond
