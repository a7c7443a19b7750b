// The word splitter's rules (command_line.hpp), one row per rule: what a line splits into, or
// which error it gives and where.
#include <mira/command_line.hpp>

#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

using mira::command_line_errc;
using mira::split_command_line;

namespace {

using words = std::vector<std::string>;

struct row {
  std::string line;
  words split;                             // when it splits
  std::optional<command_line_errc> error;  // when it does not
  std::size_t position;                    // ... and where the error is
};

row splits(std::string line, words split) {
  return {std::move(line), std::move(split), std::nullopt, 0};
}

row fails(std::string line, command_line_errc e, std::size_t position) {
  return {std::move(line), {}, e, position};
}

const row rows[] = {
    // Blanks separate words; none at the ends or in a row makes an empty word.
    splits("", {}),
    splits(" \t\n ", {}),
    splits("a", {"a"}),
    splits("  a \t b\nc  ", {"a", "b", "c"}),
    // Single quotes: everything up to the next ' is itself.
    splits("'a b'", {"a b"}),
    splits(R"('a\b "c" $d `e`')", {R"(a\b "c" $d `e`)"}),
    splits("'a\nb'", {"a\nb"}),
    // Double quotes: \ " $ ` after a backslash are themselves, a continued line is removed, any
    // other backslash is kept.
    splits(R"("a b")", {"a b"}),
    splits(R"("a\"b")", {"a\"b"}),
    splits(R"("a\\b")", {R"(a\b)"}),
    splits(R"("\$x \`y\`")", {"$x `y`"}),
    splits(R"("a\nb")", {R"(a\nb)"}),
    splits("\"a\\\nb\"", {"ab"}),
    splits(R"("it's")", {"it's"}),
    // Outside quotes a backslash makes the next character ordinary; a continued line is removed.
    splits(R"(a\ b)", {"a b"}),
    splits(R"(\'a\")", {"'a\""}),
    splits(R"(a\\b)", {R"(a\b)"}),
    splits(R"(\a)", {"a"}),
    splits("a\\\nb", {"ab"}),
    splits("a \\\n b", {"a", "b"}),
    // Parts next to each other make one word; a quote pair alone is an empty word.
    splits(R"(a'b c'"d")", {"ab cd"}),
    splits("''", {""}),
    splits(R"("" '' x)", {"", "", "x"}),
    splits("a''", {"a"}),
    // No expansion, globbing, comments or operators.
    splits("$HOME ~ *.py a#b # c ; d|e & f<g>h (i)",
           {"$HOME", "~", "*.py", "a#b", "#", "c", ";", "d|e", "&", "f<g>h", "(i)"}),
    splits("python3 'my study.py' --x \"a b\" c\\ d",
           {"python3", "my study.py", "--x", "a b", "c d"}),
    // Errors, at the open quote or the last backslash.
    fails("'", command_line_errc::unterminated_single_quote, 0),
    fails("a 'b c", command_line_errc::unterminated_single_quote, 2),
    fails("'a' 'b", command_line_errc::unterminated_single_quote, 4),
    fails("\"'\" '\"", command_line_errc::unterminated_single_quote, 4),
    fails(R"(a "b)", command_line_errc::unterminated_double_quote, 2),
    fails(R"("a\")", command_line_errc::unterminated_double_quote, 0),
    fails(R"("a\)", command_line_errc::unterminated_double_quote, 0),
    fails("a\\", command_line_errc::trailing_backslash, 1),
    fails("a\\\\\\", command_line_errc::trailing_backslash, 3),
};

}  // namespace

BOOST_AUTO_TEST_SUITE(command_line_tests)

BOOST_AUTO_TEST_CASE(each_rule_splits_or_fails_as_written) {
  for (auto& r : rows) {
    BOOST_TEST_CONTEXT("line: [" << r.line << "]") {
      auto got = split_command_line(r.line);
      if (!r.error) {
        BOOST_TEST_REQUIRE(got.has_value(), (got ? "" : got.error().message()));
        BOOST_TEST(*got == r.split, boost::test_tools::per_element());
        continue;
      }
      BOOST_TEST_REQUIRE(!got.has_value());
      BOOST_TEST((got.error().code == *r.error));
      BOOST_TEST(got.error().position == r.position);
    }
  }
}

BOOST_AUTO_TEST_CASE(errors_are_codes_in_their_own_category_with_a_message) {
  for (auto [e, text] :
       {std::pair{command_line_errc::unterminated_single_quote, "has an unterminated ' quote"},
        std::pair{command_line_errc::unterminated_double_quote, "has an unterminated \" quote"},
        std::pair{command_line_errc::trailing_backslash, "ends with a backslash"}}) {
    boost::system::error_code ec = e;
    BOOST_TEST(ec.category().name() == std::string("mira.command_line"));
    BOOST_TEST(ec.message() == text);
    BOOST_TEST((mira::command_line_error{ec, 0}.message() == text));
  }
}

BOOST_AUTO_TEST_SUITE_END()
