// The host's JSON writer: numbers in their shortest round-trip form, everything else as
// Boost.JSON writes it.
#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

namespace json = boost::json;
using mira::protocol::append_json_number;
using mira::protocol::to_json_text;

namespace {

std::string number(double d) {
  std::string out;
  append_json_number(out, d);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(json_text)

BOOST_AUTO_TEST_CASE(numbers_are_written_shortest_and_integral_ones_as_integers) {
  const std::pair<double, const char*> table[] = {
      {1.0, "1"},
      {0.5, "0.5"},
      {2.662, "2.662"},
      {0.8388748419471806, "0.8388748419471806"},
      {-1.5, "-1.5"},
      {100.0, "100"},
      {1e20, "100000000000000000000"},
      {123456789012345678901.0, "123456789012345680000"},  // shortest digits, then zeros
      {1e21, "1e+21"},
      {1.5e300, "1.5e+300"},
      {1e-6, "0.000001"},
      {1.25e-6, "0.00000125"},
      {1e-7, "1e-7"},
      {-2.5e-8, "-2.5e-8"},
      {5e-324, "5e-324"},
      {std::numeric_limits<double>::max(), "1.7976931348623157e+308"},
      {9007199254740993.0, "9007199254740992"},  // 2^53 + 1 is not a double
      {0.1 + 0.2, "0.30000000000000004"},
      {0.0, "0"},
      {-0.0, "-0.0"},                                     // "-0" reads back as the integer 0
      {std::numeric_limits<double>::infinity(), "null"},  // not JSON: null, not "Infinity"
      {std::nan(""), "null"},
  };
  for (auto& [d, text] : table) BOOST_TEST(number(d) == text);
}

BOOST_AUTO_TEST_CASE(values_keep_member_order_and_boost_json_escapes) {
  json::value v = {{"z", 1.0},
                   {"a", json::array{0.5, 2.662, 8.388748419471806e-1, nullptr, true, false}},
                   {"i", -42},
                   {"u", std::numeric_limits<std::uint64_t>::max()},
                   {"big", std::numeric_limits<std::int64_t>::min()},
                   {"s", "q\"b\\n\n\t\x01\x1f/é→😀"},
                   {"e", json::object{}},
                   {"ea", json::array{}}};
  const std::string expected =
      R"({"z":1,"a":[0.5,2.662,0.8388748419471806,null,true,false],"i":-42,)"
      R"("u":18446744073709551615,"big":-9223372036854775808,)"
      "\"s\":\"q\\\"b\\\\n\\n\\t\\u0001\\u001f/é→😀\",\"e\":{},\"ea\":[]}";
  BOOST_TEST(to_json_text(v) == expected);
  BOOST_TEST(to_json_text(v.as_object()) == expected);
  std::string appended = "x";
  mira::protocol::append_json_text(appended, v);
  BOOST_TEST(appended == "x" + expected);
  // Boost.JSON writes the same text where no double is involved.
  json::value no_doubles = {{"s", "q\"b\\\n\x01\x7f é"}, {"n", json::array{1, -2, nullptr}}};
  BOOST_TEST(to_json_text(no_doubles) == json::serialize(no_doubles));
  // And what it writes parses back to the same value.
  BOOST_TEST(json::parse(to_json_text(v)).at("s") == v.at("s"));
}

// The scan for bytes to escape reads sixteen at a time: each kind of byte at every position of
// strings on either side of that width, as Boost.JSON escapes it.
BOOST_AUTO_TEST_CASE(strings_are_escaped_at_every_length_and_position) {
  const std::string specials[] = {"\"", "\\", "\n", "\x01", "\x1f", "\x7f", "\xc3\xa9", " "};
  for (std::size_t len = 0; len <= 40; ++len) {
    for (std::size_t at = 0; at <= len; ++at) {
      for (auto& special : specials) {
        std::string s(len, 'a');
        s.insert(at, special);
        std::string out = "x";
        mira::protocol::append_json_string(out, s);
        BOOST_TEST_CONTEXT("length " << len << ", at " << at) {
          BOOST_TEST(out == "x" + json::serialize(json::string(s)));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(random_doubles_read_back_bit_for_bit) {
  std::mt19937_64 rng(20261201);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::uniform_int_distribution<int> scale(-30, 30);
  for (int i = 0; i < 10000; ++i) {
    double d;
    if (i % 2) {
      // Any bit pattern of a finite double: every exponent, subnormals included.
      std::uint64_t bits = rng();
      std::memcpy(&d, &bits, sizeof d);
      if (!std::isfinite(d)) continue;
    } else {
      d = unit(rng) * std::pow(10.0, scale(rng));  // the sizes scores and costs have
    }
    auto text = number(d);
    // std::from_chars is correctly rounded (the host's own text decoder uses it).
    double back = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), back);
    BOOST_TEST_REQUIRE((ec == std::errc{} && end == text.data() + text.size()), text);
    BOOST_TEST_REQUIRE(std::memcmp(&back, &d, sizeof d) == 0, text);
    // It is JSON: Boost.JSON reads it as a number.
    BOOST_TEST_REQUIRE(json::parse(text).is_number(), text);
  }
}

BOOST_AUTO_TEST_SUITE_END()
