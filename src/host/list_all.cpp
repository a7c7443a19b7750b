// host_handle::list_all as a composed operation: `list`, then `list_samples` for every
// eval until its cursor ends, stopping a cursor that repeats or pages that stay empty.
#include "host_impl.hpp"

#include <unordered_set>

namespace mira::detail {

namespace {

using list_all_outcome = outcome<protocol::list_result>;

asio::awaitable<list_all_outcome> list_all_coro(impl_ptr self, diagnostics* diag) {
  request_options o;
  o.diag = diag;
  auto [ec, list] = co_await async_call<protocol::list_result>(self, no_params{}, o);
  if (ec) co_return list_all_outcome{ec, {}};
  // Cursors that never repeat but keep giving empty pages would page forever.
  constexpr int max_empty_pages = 100;
  for (auto& e : list.evals) {
    std::unordered_set<std::string> seen;
    int empty_pages = 0;
    while (e.next_cursor) {
      if (!seen.insert(*e.next_cursor).second) {
        if (diag) {
          diag->clear();
          diag->message = "eval '" + e.name + "': list_samples returned cursor \"" +
                          excerpt(*e.next_cursor, 80) + "\" a second time";
        }
        co_return list_all_outcome{make_error_code(errc::cursor_loop), {}};
      }
      protocol::list_samples_params p{e.name, *e.next_cursor};
      auto [ec2, page] = co_await async_call<protocol::list_samples_result>(self, std::move(p), o);
      if (ec2) co_return list_all_outcome{ec2, {}};
      empty_pages = page.samples.empty() ? empty_pages + 1 : 0;
      if (empty_pages == max_empty_pages && page.next_cursor) {
        if (diag) {
          diag->clear();
          diag->message = "eval '" + e.name + "': list_samples returned " +
                          std::to_string(max_empty_pages) +
                          " empty pages in a row and still a next cursor";
        }
        co_return list_all_outcome{make_error_code(errc::cursor_loop), {}};
      }
      for (auto& s : page.samples) e.samples.push_back(std::move(s));
      e.next_cursor = std::move(page.next_cursor);
    }
  }
  co_return list_all_outcome{{}, std::move(list)};
}

}  // namespace

void start_list_all(const impl_ptr& impl, request_options o, handler_t<protocol::list_result> h) {
  spawn_op<protocol::list_result>(impl, list_all_coro(impl, o.diag), std::move(h), o.diag);
}

}  // namespace mira::detail
