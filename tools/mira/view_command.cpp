// `mira view`: the library's server, read only, over one results folder, on a free loopback port
// with a token made for this process; the printed URL carries the token, which the first page
// turns into a cookie.
#include "commands.hpp"
#include "config_step.hpp"
#include "console.hpp"
#include "flags.hpp"
#include "help.hpp"

#include <mira/serve/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <random>

extern char** environ;

namespace mira::cli {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

std::string new_token() {
  std::random_device rd;  // the kernel's random source on Linux
  static constexpr char hex[] = "0123456789abcdef";
  std::string t;
  for (int i = 0; i < 8; ++i) {
    auto word = rd();
    for (int j = 0; j < 8; ++j, word >>= 4) t += hex[word & 15];
  }
  return t;
}

// The results folder the RUN arguments share, and the one run's id when there is one.
std::pair<fs::path, std::string> folder_of(const run_args& a) {
  if (a.runs.empty()) return {a.results_dir, {}};
  fs::path parent;
  std::string id;
  for (auto& r : a.runs) {
    std::error_code ec;
    auto f = fs::absolute(run_folder_of(r, a.results_dir), ec).lexically_normal();
    if (!fs::is_regular_file(f / "meta.json", ec))
      throw usage_error{"no saved run at " + printable(f.string()) + " (its meta.json is missing)"};
    if (!parent.empty() && f.parent_path() != parent)
      throw usage_error{"mira view shows the runs of one results folder: " + printable(f.string()) +
                        " is not in " + printable(parent.string())};
    parent = f.parent_path();
    id = f.filename().string();
  }
  return {parent, a.runs.size() == 1 ? id : std::string()};
}

// xdg-open, detached, its output thrown away; whether it could be started.
bool open_in_browser(const std::string& url) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::string prog = "xdg-open";
  char* argv[] = {prog.data(), const_cast<char*>(url.c_str()), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "xdg-open", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0;
}

}  // namespace

int cmd_view(const std::vector<std::string>& args) {
  auto a = parse_args(command::view, args);
  if (a.help) return std::fputs(command_help(command::view).c_str(), stdout), exit_ok;
  auto project = load_project_config();
  if (!a.results_dir_given) a.results_dir = project.results_dir.string();  // [results] dir
  auto [results, one_run] = folder_of(a);
  if (!one_run.empty())
    if (auto why = serve::check_run_id(one_run))
      throw usage_error{"the viewer cannot show run '" + printable(one_run) + "': " + *why};
  serve::server_config c;
  c.port = a.view_port;
  c.read_only = true;
  c.results_dir = results;
  c.token = new_token();
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGCHLD, SIG_IGN);  // the browser's launcher is not waited for
  asio::io_context ctx{1};
  serve::server srv(ctx.get_executor(), c);
  auto ep = srv.start();
  if (!ep) {
    std::fprintf(stderr, "mira: %s\n", printable(ep.error().message()).c_str());
    return exit_host_error;
  }
  auto url = "http://127.0.0.1:" + std::to_string(ep->port()) +
             (one_run.empty() ? "/" : "/runs/" + one_run) + "?token=" + c.token;
  std::printf("%s\n", url.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "mira view: the runs in %s; Ctrl-C ends it\n",
               printable(results.string()).c_str());
  if (a.open_browser && !open_in_browser(url))
    std::fprintf(stderr, "mira view: --open: cannot start xdg-open; open the URL yourself\n");
  asio::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (ec) return;
    asio::co_spawn(ctx, srv.stop(), [&](std::exception_ptr) { signals.cancel(); });
  });
  ctx.run();
  return exit_ok;
}

}  // namespace mira::cli
