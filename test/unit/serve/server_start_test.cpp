// serve's typed errors: each code has its message, and validate(), parse_study_entry and
// start() say by their code why a server cannot start (a port in use is not a bad configuration).
#include <mira/serve/server.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

using namespace mira::serve;
namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

server_config one_study(const fs::path& results) {
  server_config c;
  c.port = 0;
  c.studies.push_back({"demo", {"/bin/true"}});
  c.results_dir = results;
  return c;
}

// A fresh directory under the temporary directory, removed at the end of the test.
struct scratch {
  fs::path dir;
  scratch() {
    std::string tmpl = (fs::temp_directory_path() / "mira-serve-start-XXXXXX").string();
    dir = ::mkdtemp(tmpl.data());
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(serve_errors)

BOOST_AUTO_TEST_CASE(every_code_has_its_own_message) {
  std::set<std::string> messages;
  for (auto e : {errc::invalid_address, errc::token_required, errc::no_study, errc::duplicate_study,
                 errc::invalid_limit, errc::invalid_study_entry, errc::results_dir_unusable,
                 errc::address_in_use, errc::bind_failed}) {
    auto ec = make_error_code(e);
    BOOST_TEST(ec.category().name() == std::string("mira.serve"));
    BOOST_TEST(ec.message().find("unknown") == std::string::npos);
    messages.insert(ec.message());
  }
  BOOST_TEST(messages.size() == 9u);
}

BOOST_AUTO_TEST_CASE(a_configuration_that_cannot_start_says_why_by_its_code) {
  auto refused = [](server_config c, errc code) {
    auto why = validate(c);
    BOOST_REQUIRE(why);
    BOOST_TEST((why->code == code), why->message());
    BOOST_TEST(!why->message().empty());
  };
  BOOST_TEST(!validate(one_study("results")));
  auto c = one_study("results");
  c.address = "localhost";  // a name, not an address
  refused(c, errc::invalid_address);
  c = one_study("results");
  c.address = "0.0.0.0";
  refused(c, errc::token_required);
  c.token = "0123456789abcdef";
  BOOST_TEST(!validate(c));
  c = one_study("results");
  c.studies.clear();
  refused(c, errc::no_study);
  c = one_study("results");
  c.studies.push_back({"demo", {"/bin/false"}});
  refused(c, errc::duplicate_study);
  c = one_study("results");
  c.max_connections = 0;
  refused(c, errc::invalid_limit);
}

BOOST_AUTO_TEST_CASE(start_tells_a_port_in_use_from_a_directory_it_cannot_make) {
  scratch s;
  asio::io_context ctx{1};
  // The port of a socket that listens already.
  asio::ip::tcp::acceptor taken(ctx, {asio::ip::make_address("127.0.0.1"), 0});
  auto c = one_study(s.dir / "results");
  c.port = taken.local_endpoint().port();
  server busy(ctx.get_executor(), c);
  auto refused = busy.start();
  BOOST_REQUIRE(!refused);
  BOOST_TEST((refused.error().code == errc::address_in_use), refused.error().message());
  BOOST_TEST(refused.error().message().find(std::to_string(c.port)) != std::string::npos);

  // The results directory's place is a file.
  std::ofstream(s.dir / "file") << "x";
  auto f = one_study(s.dir / "file" / "results");
  server no_dir(ctx.get_executor(), f);
  auto unusable = no_dir.start();
  BOOST_REQUIRE(!unusable);
  BOOST_TEST((unusable.error().code == errc::results_dir_unusable), unusable.error().message());

  auto v = one_study(s.dir / "results");
  v.studies.clear();
  server invalid(ctx.get_executor(), v);
  auto not_valid = invalid.start();
  BOOST_REQUIRE(!not_valid);
  BOOST_TEST((not_valid.error().code == errc::no_study));
}

BOOST_AUTO_TEST_SUITE_END()
