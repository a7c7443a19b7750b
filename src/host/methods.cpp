// The method table: one row per protocol method (name, required capability, whether `cancel`
// applies, whether it may precede initialize, params encoder, result decoder and check), and the
// one start function every request goes through.
#include "host_impl.hpp"

#include <mira/protocol/json_text.hpp>
#include "protocol/text_decoder.hpp"

namespace mira::detail {

namespace {

template <class T>
std::optional<protocol::decode_error> assign(protocol::decoded<T> r, T& out) {
  if (!r) return std::move(r.error());
  out = std::move(*r);
  return std::nullopt;
}

template <class T, protocol::decoded<T> (*F)(const json::value&)>
std::optional<protocol::decode_error> by_ref(multiplexer& mux, inbound& in, T& out) {
  return assign(F(mux.result_value(in)), out);
}

// From the result's text, without a DOM (the multiplexer routes results as text).
template <class T, protocol::decoded<T> (*F)(std::string_view)>
std::optional<protocol::decode_error> by_text(multiplexer&, inbound& in, T& out) {
  return assign(F(in.result_text), out);
}

// A result the multiplexer's hot path did not decode (decode_unchecked declined it): straight
// from the text, into the value handed to the caller, with the DOM decoder behind.
std::optional<protocol::decode_error> decode_run(multiplexer&, inbound& in,
                                                 protocol::run_result& out) {
  return protocol::detail::decode_run_result_text_into(in.result_text, out);
}
std::optional<protocol::decode_error> decode_execute(multiplexer& mux, inbound& in,
                                                     protocol::execute_result& out) {
  const auto& v = mux.result_value(in);
  return assign(protocol::decode_execute_result(v, std::string(in.result_text)), out);
}
std::optional<protocol::decode_error> decode_cancel(multiplexer& mux, inbound& in, bool& out) {
  return assign(
      protocol::decode_cancel_result(mux.result_value(in)).map([](auto r) { return r.cancelled; }),
      out);
}

error_code check_initialize(host_impl& host, protocol::initialize_result& r, diagnostics& d) {
  auto theirs = protocol::version_major(r.protocol_version);
  auto ours = protocol::version_major(protocol::protocol_version);
  if (!theirs || theirs != ours) {
    d.message = "study '" + r.study + "' speaks protocol " + r.protocol_version +
                ", this host speaks " + std::string(protocol::protocol_version) +
                " (major versions must match)";
    // Not logged: the caller gets it in the error, and printing both showed it twice.
    return make_error_code(errc::incompatible_protocol);
  }
  host.set_initialized(r);
  return {};
}

std::string encode_none(const no_params&) {
  return {};
}
std::string encode_initialize(const host_impl& host) {
  protocol::initialize_params p;
  p.host = host.options().host_name;
  return protocol::to_json_text(protocol::encode(p));
}
std::string encode_run(const protocol::run_params& p) {
  std::string out;
  protocol::append_json(out, p);
  return out;
}
template <class P>
std::string encode_dom(const P& p) {
  return protocol::to_json_text(protocol::encode(p));
}

// A row: the untyped facts, then the codec for its params (P) and its result (T).
template <class P, class T>
struct row {
  method<T> m;
  std::string (*encode)(const P&);
};

// The table. A (params, result) pair names one method: run and execute share their params,
// run and score their result.
template <class P, class T>
extern const row<P, T> table;

template <>
constinit const row<no_params, protocol::initialize_result>
    table<no_params, protocol::initialize_result>{
        {{"initialize", {}, false, true},
         &by_ref<protocol::initialize_result, protocol::decode_initialize_result>,
         &check_initialize},
        &encode_none};
template <>
constinit const row<no_params, protocol::list_result> table<no_params, protocol::list_result>{
    {{"list", {}, false, false},
     &by_text<protocol::list_result, protocol::decode_list_result_text>},
    &encode_none};
template <>
constinit const row<protocol::list_samples_params, protocol::list_samples_result>
    table<protocol::list_samples_params, protocol::list_samples_result>{
        {{"list_samples", {}, false, false},
         &by_text<protocol::list_samples_result, protocol::decode_list_samples_result_text>},
        &encode_dom<protocol::list_samples_params>};
template <>
constinit const row<protocol::run_params, protocol::run_result>
    table<protocol::run_params, protocol::run_result>{
        {{"run", {}, true, false}, &decode_run, nullptr, &protocol::detail::read_run_result_text},
        &encode_run};
template <>
constinit const row<protocol::run_params, protocol::execute_result>
    table<protocol::run_params, protocol::execute_result>{
        {{"execute", "execute", true, false}, &decode_execute}, &encode_run};
template <>
constinit const row<protocol::score_params, protocol::run_result>
    table<protocol::score_params, protocol::run_result>{{{"score", "score", true, false},
                                                         &decode_run,
                                                         nullptr,
                                                         &protocol::detail::read_run_result_text},
                                                        &encode_dom<protocol::score_params>};
template <>
constinit const row<protocol::cancel_params, bool> table<protocol::cancel_params, bool>{
    {{"cancel", "cancel", false, false}, &decode_cancel}, &encode_dom<protocol::cancel_params>};

}  // namespace

template <class P, class T>
void start(const impl_ptr& impl, P params, request_options o, handler_t<T> h,
           asio::io_context* handler_context) {
  auto& r = table<P, T>;
  // initialize's params come from the host's options, not from the caller.
  std::string text;
  if constexpr (std::is_same_v<T, protocol::initialize_result>)
    text = encode_initialize(*impl);
  else
    text = r.encode(params);
  impl->request<T>(r.m, std::move(text), std::move(o), std::move(h), handler_context);
}

template void start(const impl_ptr&, no_params, request_options,
                    handler_t<protocol::initialize_result>, asio::io_context*);
template void start(const impl_ptr&, no_params, request_options, handler_t<protocol::list_result>,
                    asio::io_context*);
template void start(const impl_ptr&, protocol::list_samples_params, request_options,
                    handler_t<protocol::list_samples_result>, asio::io_context*);
template void start(const impl_ptr&, protocol::run_params, request_options,
                    handler_t<protocol::run_result>, asio::io_context*);
template void start(const impl_ptr&, protocol::run_params, request_options,
                    handler_t<protocol::execute_result>, asio::io_context*);
template void start(const impl_ptr&, protocol::score_params, request_options,
                    handler_t<protocol::run_result>, asio::io_context*);
template void start(const impl_ptr&, protocol::cancel_params, request_options, handler_t<bool>,
                    asio::io_context*);

}  // namespace mira::detail
