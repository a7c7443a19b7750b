// Test helpers of the model layer: a throwaway CA and server certificate (the openssl command
// line), the local provider-shaped server and proxy (fake_provider.py) as child processes, and
// their /__stats.
#pragma once

#include "common/schema.hpp"
#include "common/temp_dir.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace mira::test {

inline bool has_openssl() {
  return std::system("command -v openssl > /dev/null 2>&1") == 0;
}

/// Precondition of the tests that need certificates: the openssl command line.
inline boost::test_tools::assertion_result needs_openssl(boost::unit_test::test_unit_id) {
  if (has_openssl()) return true;
  return skip_test_because("the openssl command line is not installed (Debian: openssl)");
}

/// A CA and a server certificate for `names` (127.0.0.1 and localhost unless given) signed by
/// it (P-256 keys, valid for two days), in a temporary folder.
struct test_pki {
  temp_dir dir;
  std::string ca = dir / "ca.pem", cert = dir / "server.pem", key = dir / "server.key";

  explicit test_pki(const std::string& names = "DNS:localhost,IP:127.0.0.1") {
    {
      std::ofstream ext(dir / "ext.cnf");
      ext << "subjectAltName=" << names
          << "\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n";
    }
    const std::string d = dir.path.string();
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    run("openssl req -x509 " + ec + "-keyout " + d + "/ca.key -out " + ca +
        " -days 2 -subj '/CN=mira test CA' -addext basicConstraints=critical,CA:TRUE"
        " -addext keyUsage=critical,keyCertSign,cRLSign");
    run("openssl req " + ec + "-keyout " + key + " -out " + d + "/server.csr -subj /CN=localhost");
    run("openssl x509 -req -in " + d + "/server.csr -CA " + ca + " -CAkey " + d +
        "/ca.key -set_serial 2 -days 2 -extfile " + d + "/ext.cnf -out " + cert);
  }

 private:
  static void run(const std::string& command) {
    if (std::system((command + " > /dev/null 2>&1").c_str()) != 0)
      throw std::runtime_error("test_pki: failed: " + command);
  }
};

/// fake_provider.py running with these arguments; its port read from its first line.
class fake_process {
 public:
  explicit fake_process(const std::vector<std::string>& args) {
    int fds[2], in[2];
    if (::pipe2(fds, O_CLOEXEC) != 0 || ::pipe2(in, O_CLOEXEC) != 0)
      throw std::runtime_error("fake_process: pipe");
    stdin_ = in[1];  // the child exits when this closes, with this process if need be
    std::vector<std::string> argv{MIRA_PYTHON3, MIRA_FAKE_PROVIDER};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    const int rc = ::posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    ::close(in[0]);
    if (rc != 0) {
      ::close(fds[0]);
      throw std::runtime_error("fake_process: cannot start " + argv[0]);
    }
    std::string line;
    pollfd p{fds[0], POLLIN, 0};
    char c = 0;
    // The port line, within 20 s (python3 starts in a fraction of that).
    while (::poll(&p, 1, 20000) == 1 && ::read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    ::close(fds[0]);
    port_ = std::atoi(line.c_str());
    if (port_ <= 0) throw std::runtime_error("fake_process: no port from fake_provider.py");
  }
  ~fake_process() {
    ::close(stdin_);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  fake_process(const fake_process&) = delete;
  fake_process& operator=(const fake_process&) = delete;

  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
};

/// The throwaway PKI, the provider server over TLS with it (key "sk-test") and SSL_CERT_FILE
/// naming its CA (SSL_CERT_DIR unset), for a client made afterwards. A proxy the machine's
/// environment names is unset: the tests choose their own.
struct provider_fixture {
  test_pki pki;
  fake_process server{{"--cert", pki.cert, "--key", pki.key, "--api-key", "sk-test"}};

  provider_fixture() {
    ::setenv("SSL_CERT_FILE", pki.ca.c_str(), 1);
    ::unsetenv("SSL_CERT_DIR");
    for (const char* name :
         {"https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"})
      ::unsetenv(name);
  }
  std::string url(const std::string& path, const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(server.port()) + path;
  }
};

}  // namespace mira::test
