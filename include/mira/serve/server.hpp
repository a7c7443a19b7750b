// `mira serve` as a library component: an HTTP API and a live dashboard (Boost.Beast) that
// starts, watches, cancels and resumes eval runs through the library, saving them exactly as
// `mira run` does. It runs on the executor it is given, beside the program's other work.
#pragma once

#include <mira/log.hpp>
#include <mira/serve/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <tl/expected.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::serve {

/// A study on the allow-list: its name and the command that starts it (never from a request).
struct study_entry {
  std::string name;
  std::vector<std::string> argv;
};
/// Parses `NAME=COMMAND LINE` (the command split as a POSIX shell would, without expansion).
/// Fails with errc::invalid_study_entry, saying what is wrong.
tl::expected<study_entry, error> parse_study_entry(std::string_view text);

/// Why `id` cannot be the id of a run the API serves, or nothing. Stricter than the store: 1 to
/// 64 characters of [A-Za-z0-9._-], starting with a letter or digit.
std::optional<std::string> check_run_id(std::string_view id);

struct server_config {
  /// Where to listen. Loopback by default; any other address needs `token`.
  std::string address = "127.0.0.1";
  unsigned short port = 8750;  // 0: any free port (see server::local_endpoint)
  /// The studies a request may name; a request never supplies a command or a path.
  std::vector<study_entry> studies;
  /// Required as `Authorization: Bearer <token>` on every API route when not empty.
  std::string token;
  /// Host names a request may give besides loopback names and the literal listen address
  /// (misdirected, 421, otherwise); a POST's Origin must be this server's or one of these.
  std::vector<std::string> allowed_hosts;
  std::filesystem::path results_dir = "results";
  /// Serves the saved runs only (`mira view`): no study is needed, and every POST is refused
  /// (403 read_only).
  bool read_only = false;
  std::size_t max_runs = 4;  // runs going (and catalogs loading) at once; one more is 429
  /// The cases one run may plan: a bigger selection is refused (413) before anything starts.
  std::size_t max_cases = 100000;
  std::size_t max_connections = 256;                  // one more is answered 503 and closed
  std::size_t max_connections_per_client = 32;        // from one address; the same beyond
  std::size_t max_body_bytes = std::size_t{1} << 20;  // 413 beyond
  /// The study processes one run may start (`options.procs`; 422 beyond). All runs together
  /// also stay within the descriptors the process may open (429 beyond).
  std::size_t max_procs = 16;
  /// Also the bound on a chunk's header line and on a chunked body's trailers (which are read
  /// and dropped); a chunk's extensions may hold 4 KiB, a request's 64 KiB. 400 beyond.
  std::size_t max_header_bytes = std::size_t{16} << 10;
  std::chrono::milliseconds header_timeout{10000};  // a request's header must arrive within
  std::chrono::milliseconds idle_timeout{60000};    // a body, and a kept-alive connection
  /// A write that makes no progress for this long (a client that does not read its answer or
  /// its event stream) closes the connection. Such a connection is also the first to be closed
  /// when a newcomer needs its place, whatever it sent.
  std::chrono::milliseconds write_timeout{10000};
  std::chrono::milliseconds init_timeout{60000};  // a study's initialize and listing
  std::chrono::milliseconds keepalive{15000};     // an event stream's comment when quiet
  /// An event stream sends what came within this much of its last write together (0: each
  /// event at once), so a busy run costs each client a write per interval, not per event.
  std::chrono::milliseconds event_interval{20};
  /// The server's own diagnostics (a connection that failed with an exception).
  log_sink log = stderr_log_sink();
};

/// Why the server must not start with `c` (an address that is not an IP address, a
/// non-loopback address without a token, no study unless read_only, a duplicated study name,
/// zero limits), or
/// nothing. The code is errc::invalid_address, token_required, no_study, duplicate_study or
/// invalid_limit.
std::optional<error> validate(const server_config& c);

/// The server. Construct, start(), and co_await stop() before the executor's context goes away.
/// A run still going when the server object is destroyed keeps what it needs alive until it
/// has ended and been saved (stop() is what cancels it).
/// @par Executor
/// Everything runs on `ex`, which must not run handlers concurrently: an io_context run by one
/// thread, or a strand. Study processes and the store's writer threads post back to it.
class server {
 public:
  server(boost::asio::any_io_executor ex, server_config config);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Validates the configuration, binds and starts accepting. Runs saved in results_dir are
  /// listed (and resumable) from then on. Fails with validate()'s error, or with
  /// errc::results_dir_unusable, errc::address_in_use or errc::bind_failed (the message names
  /// the directory or the address and the system's reason).
  tl::expected<boost::asio::ip::tcp::endpoint, error> start();
  /// The bound endpoint (the chosen port when the configuration said 0).
  boost::asio::ip::tcp::endpoint local_endpoint() const;

  /// Stops accepting, refuses new runs (503), cancels the runs in flight and waits until each
  /// is saved and marked interrupted, then closes every connection. Idempotent.
  boost::asio::awaitable<void> stop();

  const server_config& config() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace mira::serve
