// The NDJSON framer: split reads, CRLF, blank lines, runaway lines, the unterminated tail.
#include "framing/line_framer.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>

using mira::detail::line_framer;
using fk = line_framer::frame_kind;

namespace {

// Feeds `input` in chunks of `step` bytes and collects what comes out, as "kind:text:size".
std::vector<std::string> feed(line_framer& f, std::string_view input, std::size_t step,
                              bool finish = true) {
  std::vector<std::string> out;
  auto collect = [&](const line_framer::frame& fr) {
    std::string kind = fr.kind == fk::line       ? "line"
                       : fr.kind == fk::overlong ? "overlong"
                                                 : "partial";
    out.push_back(kind + ":" + std::string(fr.text) + ":" + std::to_string(fr.size));
  };
  // Like a reader: each read fills at most the space prepare() offers and at most `step`.
  for (std::size_t i = 0; i < input.size();) {
    auto buf = f.prepare();
    BOOST_REQUIRE(!buf.empty());
    auto n = std::min({step, input.size() - i, buf.size()});
    std::memcpy(buf.data(), input.data() + i, n);
    f.commit(n);
    i += n;
    while (auto fr = f.next()) collect(*fr);
  }
  if (finish)
    if (auto fr = f.finish()) collect(*fr);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(line_framer_tests)

BOOST_AUTO_TEST_CASE(lines_survive_every_split) {
  std::string input = "{\"id\":1}\n\n  \r\n{\"id\":2}\r\n{\"id\":3}\n";
  for (std::size_t step = 1; step <= input.size(); ++step) {
    BOOST_TEST_CONTEXT("step " << step) {
      line_framer f(1024, 16);
      auto out = feed(f, input, step);
      std::vector<std::string> want{"line:{\"id\":1}:8", "line:{\"id\":2}:8", "line:{\"id\":3}:8"};
      BOOST_TEST(out == want, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(overlong_line_is_skipped_and_reading_continues) {
  std::string big(5000, 'x');
  std::string input = "{\"a\":1}\n" + big + "\n{\"b\":2}\n";
  for (std::size_t step : {1u, 7u, 64u, 100000u}) {
    BOOST_TEST_CONTEXT("step " << step) {
      line_framer f(100, 64);
      auto out = feed(f, input, step);
      BOOST_REQUIRE(out.size() == 3u);
      BOOST_TEST(out[0] == "line:{\"a\":1}:7");
      BOOST_TEST(out[1].rfind("overlong:xxxx", 0) == 0);
      BOOST_TEST(out[1].substr(out[1].rfind(':')) == ":5000");
      BOOST_TEST(out[2] == "line:{\"b\":2}:7");
    }
  }
}

BOOST_AUTO_TEST_CASE(memory_stays_bounded_while_a_runaway_line_streams) {
  line_framer f(1000, 256);
  std::string chunk(256, 'y');
  std::size_t max_buffered = 0;
  for (int i = 0; i < 10000; ++i) {  // 2.5 MB without a newline
    auto buf = f.prepare();
    std::memcpy(buf.data(), chunk.data(), chunk.size());
    f.commit(chunk.size());
    BOOST_TEST(!f.next().has_value());
    max_buffered = std::max(max_buffered, f.buffered());
  }
  BOOST_TEST(max_buffered <= 1000u + 256u);
  auto buf = f.prepare();
  buf[0] = '\n';
  f.commit(1);
  auto fr = f.next();
  BOOST_REQUIRE(fr);
  BOOST_TEST((fr->kind == fk::overlong));
  BOOST_TEST(fr->size == 2560000u);
}

BOOST_AUTO_TEST_CASE(unterminated_tail_is_reported_at_the_end) {
  line_framer f(1024, 16);
  auto out = feed(f, "{\"id\":1}\n{\"id\":", 5);
  std::vector<std::string> want{"line:{\"id\":1}:8", "partial:{\"id\"::6"};
  BOOST_TEST(out == want, boost::test_tools::per_element());
  line_framer g(1024, 16);
  BOOST_TEST(feed(g, "{}\n   ", 3).size() == 1u);  // a blank tail is nothing
}

BOOST_AUTO_TEST_CASE(lines_buffered_counts_what_next_has_not_returned) {
  // The connection compares it with the requests the study holds to tell whether the study
  // has run dry (see host.cpp): blank lines count until skipped, the unterminated tail never.
  line_framer f(64, 16);
  auto put = [&](std::string_view s) {
    while (!s.empty()) {
      auto buf = f.prepare();
      auto n = std::min(buf.size(), s.size());
      std::memcpy(buf.data(), s.data(), n);
      f.commit(n);
      s.remove_prefix(n);
    }
  };
  put("{\"id\":1}\n\n{\"id\":2}\n{\"id\":");
  BOOST_TEST(f.lines_buffered() == 3u);
  BOOST_REQUIRE(f.next());
  BOOST_TEST(f.lines_buffered() == 2u);
  BOOST_REQUIRE(f.next());  // the blank line is skipped on the way
  BOOST_TEST(f.lines_buffered() == 0u);
  BOOST_TEST(!f.next());
  put("3}\n");
  BOOST_TEST(f.lines_buffered() == 1u);
  BOOST_REQUIRE(f.next());
  BOOST_TEST(f.lines_buffered() == 0u);
  put(std::string(70, 'x') + "\n");  // overlong (limit 64): reported, no longer buffered
  BOOST_TEST(f.lines_buffered() == 1u);
  auto over = f.next();
  BOOST_REQUIRE(over);
  BOOST_TEST((over->kind == fk::overlong));
  BOOST_TEST(f.lines_buffered() == 0u);
}

BOOST_AUTO_TEST_CASE(excerpts_are_printable_and_bounded) {
  using mira::detail::excerpt;
  BOOST_TEST(excerpt("a\x1b[31mb\n") == "a\\x1b[31mb\\x0a");
  BOOST_TEST(excerpt(std::string(300, 'z'), 10) == "zzzzzzzzzz...");
  // Bytes that are not UTF-8 and C1 controls are shown, characters kept whole: the excerpt is
  // valid UTF-8 whatever the study wrote.
  BOOST_TEST(excerpt("\xff\xfe<b>\xc3\xa9\xed\xa0\x80") == "\\xff\\xfe<b>\xc3\xa9\\xed\\xa0\\x80");
  BOOST_TEST(excerpt("a\xc2\x9b"
                     "31m\xe2\x82\xac") ==
             "a\\xc2\\x9b"
             "31m\xe2\x82\xac");
  BOOST_TEST(excerpt("ab\xe2\x82\xac", 3) == "ab...");  // not half of the euro sign
  BOOST_TEST(excerpt("ab\xe2\x82", 10) == "ab\\xe2\\x82");
}

BOOST_AUTO_TEST_SUITE_END()
