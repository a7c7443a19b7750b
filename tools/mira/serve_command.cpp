// `mira serve`: the library's server (mira/serve/server.hpp) on this process's io_context, with
// its configuration from the flags and SIGTERM/SIGINT stopping it gracefully.
#include "commands.hpp"
#include "config_step.hpp"
#include "console.hpp"
#include "flags.hpp"
#include "help.hpp"

#include <mira/config/launch.hpp>
#include <mira/serve/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace mira::cli {

namespace asio = boost::asio;

namespace {

serve::server_config config_from(const run_args& a, const config::config& project) {
  serve::server_config c;
  auto colon = a.listen.rfind(':');
  c.address = a.listen.substr(0, colon);
  if (c.address.size() > 2 && c.address.front() == '[' && c.address.back() == ']')
    c.address = c.address.substr(1, c.address.size() - 2);  // [::1]:8750
  c.port = static_cast<unsigned short>(std::stoul(a.listen.substr(colon + 1)));
  for (auto& s : a.serve_studies) {
    auto e = serve::parse_study_entry(s);
    if (!e) throw usage_error{"--study: " + printable(e.error().message())};
    c.studies.push_back(std::move(*e));
  }
  // mira.toml's launchers are on the allow-list too, under their names (a --study of the same
  // name wins), each resolved to its argv as `mira run --launcher NAME` resolves it.
  auto probe = config::system_probe::real();
  for (auto& launcher : project.launchers) {
    // A reference, not a structured binding: Clang captures those in a lambda (C++20) only
    // from version 16.
    const auto& name = launcher.first;
    if (std::any_of(c.studies.begin(), c.studies.end(),
                    [&](const serve::study_entry& e) { return e.name == name; }))
      continue;
    config::launch_request r;
    r.launcher = name;
    auto resolved = config::resolve_launch(r, project, probe);
    if (!resolved)
      throw usage_error{"mira.toml launcher '" + printable(name) +
                        "': " + printable(resolved.error().message())};
    c.studies.push_back({name, std::move(resolved->argv)});
  }
  if (c.studies.empty())
    throw usage_error{"mira serve needs a study: --study NAME=CMD, or a launcher in mira.toml"};
  if (!a.token_file.empty()) {
    std::ifstream in(a.token_file);
    if (!in) throw usage_error{"--token-file: cannot read " + printable(a.token_file)};
    std::stringstream ss;
    ss << in.rdbuf();
    auto token = ss.str();
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
      token.pop_back();
    if (token.size() < 16)
      throw usage_error{"--token-file: the token must be at least 16 characters"};
    c.token = std::move(token);
  }
  c.allowed_hosts = a.allowed_hosts;
  c.results_dir = a.results_dir;
  c.max_runs = a.max_runs;
  c.max_cases = a.max_cases;
  c.max_procs = a.max_procs;
  if (auto why = serve::validate(c)) throw usage_error{why->message()};
  return c;
}

}  // namespace

int cmd_serve(const std::vector<std::string>& args) {
  auto a = parse_args(command::serve, args);
  if (a.help) return std::fputs(command_help(command::serve).c_str(), stdout), exit_ok;
  auto project = load_project_config();
  if (!a.results_dir_given) a.results_dir = project.results_dir.string();  // [results] dir
  auto config = config_from(a, project);
  std::signal(SIGPIPE, SIG_IGN);  // a study that died must not take the server with it
  asio::io_context ctx{1};
  serve::server srv(ctx.get_executor(), config);
  auto ep = srv.start();
  if (!ep) {
    std::fprintf(stderr, "mira: %s\n", printable(ep.error().message()).c_str());
    return exit_host_error;
  }
  auto host = ep->address().to_string();
  if (ep->address().is_v6()) host = "[" + host + "]";
  // The first line on stdout says where: with port 0 it is how a caller learns the port.
  std::printf("listening on http://%s:%u/\n", host.c_str(), static_cast<unsigned>(ep->port()));
  std::fflush(stdout);
  std::fprintf(stderr, "mira serve: %zu stud%s allowed; results in %s; %s\n", config.studies.size(),
               config.studies.size() == 1 ? "y" : "ies",
               printable(config.results_dir.string()).c_str(),
               config.token.empty() ? "no token (loopback only)" : "bearer token required");

  // The first signal stops gracefully (runs saved and marked interrupted); a second quits.
  asio::signal_set signals(ctx, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (ec) return;
    std::fprintf(stderr, "mira serve: stopping: cancelling and saving the runs in flight\n");
    signals.async_wait([](boost::system::error_code e, int) {
      if (!e) std::_Exit(exit_interrupted);
    });
    asio::co_spawn(ctx, srv.stop(), [&](std::exception_ptr) {
      signals.cancel();
      std::fprintf(stderr, "mira serve: stopped\n");
    });
  });
  ctx.run();
  return exit_ok;
}

}  // namespace mira::cli
