// The error category, its predicates and how an exit status reads.
#include <mira/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <set>

using namespace mira;

BOOST_AUTO_TEST_SUITE(error_tests)

BOOST_AUTO_TEST_CASE(every_code_has_its_own_message) {
  std::set<std::string> messages;
  for (auto e :
       {errc::study_error, errc::study_error_retryable, errc::study_exited, errc::bad_response,
        errc::incompatible_protocol, errc::not_supported, errc::cursor_loop, errc::spawn_failed,
        errc::response_too_large, errc::not_initialized, errc::timed_out}) {
    auto ec = make_error_code(e);
    BOOST_TEST(ec.category().name() == std::string("mira"));
    BOOST_TEST(ec.message().find("unknown") == std::string::npos);
    messages.insert(ec.message());
  }
  BOOST_TEST(messages.size() == 11u);
}

BOOST_AUTO_TEST_CASE(predicates_classify_without_text) {
  BOOST_TEST(is_retryable(make_error_code(errc::study_error_retryable)));
  BOOST_TEST(!is_retryable(make_error_code(errc::study_error)));
  BOOST_TEST(is_fatal(make_error_code(errc::study_exited)));
  BOOST_TEST(is_fatal(make_error_code(errc::spawn_failed)));
  BOOST_TEST(!is_fatal(make_error_code(errc::bad_response)));
  BOOST_TEST(!is_fatal(boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(messages_say_what_the_study_said_and_how_it_ended) {
  error e{make_error_code(errc::study_error), {}};
  e.diag.study_error = protocol::rpc_error{-32602, "no such eval: x", false, std::nullopt};
  BOOST_TEST(e.message() == "the study reported an error: no such eval: x (code -32602)");
  error died{make_error_code(errc::study_exited), {}};
  died.diag.message = "the study closed its output";
  died.diag.exit = exit_status{-1, 9};
  BOOST_TEST(died.message() ==
             "the study exited or closed its output: the study closed its output [killed by "
             "signal 9 (SIGKILL)]");
  exit_status code3{3, 0};
  BOOST_TEST(code3.to_string() == "exit code 3");
  exit_status none;
  none.no_process = true;
  BOOST_TEST(none.to_string() == "no process");
}

BOOST_AUTO_TEST_SUITE_END()
