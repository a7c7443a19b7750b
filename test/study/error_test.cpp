// The study SDK's error category and the JSON-RPC codes its errors are answered with.
#include <mira/study/error.hpp>

#include <boost/test/unit_test.hpp>

namespace study = mira::study;

BOOST_AUTO_TEST_SUITE(study_error)

BOOST_AUTO_TEST_CASE(each_error_has_its_json_rpc_code) {
  struct row {
    study::errc e;
    std::int64_t code;
  };
  for (auto [e, code] :
       {row{study::errc::unknown_method, -32601}, row{study::errc::invalid_request, -32600},
        row{study::errc::duplicate_id, -32600}, row{study::errc::invalid_params, -32602},
        row{study::errc::unknown_eval, -32602}, row{study::errc::unknown_sample, -32602},
        row{study::errc::unknown_target, -32602}, row{study::errc::cancelled, -32800},
        row{study::errc::subject_failed, -32603}, row{study::errc::scorer_failed, -32603},
        row{study::errc::sample_failed, -32603}}) {
    boost::system::error_code ec = e;
    BOOST_TEST(ec.category().name() == std::string("mira.study"));
    BOOST_TEST(study::rpc_code(ec) == code);
    BOOST_TEST(!ec.message().empty());
  }
  BOOST_TEST(study::rpc_code(make_error_code(boost::system::errc::io_error)) == 0);
}

BOOST_AUTO_TEST_CASE(a_request_error_says_what_the_wire_carries) {
  study::request_error e(study::errc::unknown_sample, "no such sample: greet/x", true);
  auto rpc = e.to_rpc();
  BOOST_TEST(rpc.code == -32602);
  BOOST_TEST(rpc.message == "no such sample: greet/x");
  BOOST_TEST(rpc.retryable);
}

BOOST_AUTO_TEST_CASE(an_infra_error_marks_a_transcript_for_the_hosts_retry) {
  mira::protocol::transcript t;
  t.final_response = "half done";
  study::infra_error("rate limited (HTTP 429)", std::chrono::milliseconds(2500)).apply_to(t);
  BOOST_TEST(t.error.value_or("") == "rate limited (HTTP 429)");
  BOOST_TEST((t.error_kind == mira::protocol::error_kind::infra));
  BOOST_TEST(t.metadata.get().at("retry_after_ms").to_number<int>() == 2500);
  BOOST_TEST(t.final_response == "half done");  // what the subject did is kept

  mira::protocol::transcript u;
  study::infra_error("connection refused").apply_to(u);
  BOOST_TEST(!u.metadata.get().contains("retry_after_ms"));
}

BOOST_AUTO_TEST_SUITE_END()
