// serial_executor.hpp. The one use of asio::detail in the library: Asio 1.26 keeps an
// io_context's concurrency hint in its scheduler and offers no public query for it.
#include "serial_executor.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

namespace mira::detail {

namespace asio = boost::asio;

bool runs_serially(const asio::any_io_executor& ex) {
  if (ex.target<asio::strand<asio::any_io_executor>>() ||
      ex.target<asio::strand<asio::io_context::executor_type>>())
    return true;
  auto* e = ex.target<asio::io_context::executor_type>();
  if (!e) return false;
  auto& ctx = asio::query(*e, asio::execution::context);
  return asio::use_service<asio::detail::scheduler>(ctx).concurrency_hint() == 1;
}

asio::any_io_executor serial_executor(const asio::any_io_executor& ex) {
  return runs_serially(ex) ? ex : asio::any_io_executor(asio::make_strand(ex));
}

}  // namespace mira::detail
