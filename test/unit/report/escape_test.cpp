// Escaping per output context, byte by byte.
#include <mira/report/escape.hpp>

#include <boost/test/unit_test.hpp>

using namespace mira::report;

BOOST_AUTO_TEST_SUITE(escaping)

BOOST_AUTO_TEST_CASE(the_terminal_never_gets_a_control_sequence) {
  BOOST_TEST(printable("a\x1b[31mb\x07") == "a\\x1b[31mb\\x07");
  BOOST_TEST(printable("x\xc2\x9by") == "x\\u{9b}y");  // U+009B, CSI on 8-bit terminals
  BOOST_TEST(printable("\x9b[2J") == "\\x9b[2J");      // a lone byte: not UTF-8
  BOOST_TEST(printable("caf\xc3\xa9 \xe2\x9c\x93") == "caf\xc3\xa9 \xe2\x9c\x93");
  BOOST_TEST(printable(std::string_view("n\0l", 3)) == "n\\x00l");
  BOOST_TEST(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
}

BOOST_AUTO_TEST_CASE(html_escapes_markup_and_quotes_and_repairs_utf8) {
  BOOST_TEST(html_text("\"><script>x</script>") == "&quot;&gt;&lt;script&gt;x&lt;/script&gt;");
  BOOST_TEST(html_text("a'b&c") == "a&#39;b&amp;c");
  BOOST_TEST(html_text("t\tn\nz\x01\x7f") == "t\tn\nz");
  BOOST_TEST(html_text("bad\xff") == "bad\xef\xbf\xbd");
  BOOST_TEST(html_text("\xc2\x9b") == "");
}

BOOST_AUTO_TEST_CASE(only_http_and_https_urls_become_links) {
  BOOST_TEST(safe_href("https://x.org/?a=1&b=\"2\"") == "https://x.org/?a=1&amp;b=&quot;2&quot;");
  BOOST_TEST(safe_href("HTTP://x.org") == "HTTP://x.org");
  BOOST_TEST(safe_href("javascript:alert(1)").empty());
  BOOST_TEST(safe_href(" javascript:alert(1)").empty());
  BOOST_TEST(safe_href("data:text/html,<script>").empty());
  BOOST_TEST(safe_href("https://x.org/\njavascript:").empty());
}

BOOST_AUTO_TEST_CASE(xml_shows_what_xml_cannot_carry_as_text) {
  BOOST_TEST(xml_text("]]><a b='c'>&") == "]]&gt;&lt;a b=&apos;c&apos;&gt;&amp;");
  BOOST_TEST(xml_text(std::string_view("a\0b\x01\x1f", 5)) == "a\\x00b\\x01\\x1f");
  BOOST_TEST(xml_text("\t\n\r") == "&#9;&#10;&#13;");
  BOOST_TEST(xml_text("x\xef\xbf\xbey\xef\xbf\xbfz") ==
             "x\\xef\\xbf\\xbey\\xef\\xbf\\xbfz");  // U+FFFE, U+FFFF
  BOOST_TEST(xml_text("\xc3\xa9\xff\xc3") == "\xc3\xa9\\xff\\xc3");
  // Keys that differ only in such a byte keep two names.
  BOOST_TEST(xml_text("case\x01") != xml_text("case\x02"));
}

BOOST_AUTO_TEST_CASE(csv_quotes_only_when_needed) {
  BOOST_TEST(csv_field("plain") == "plain");
  BOOST_TEST(csv_field("a,\"b\"") == "\"a,\"\"b\"\"\"");
  BOOST_TEST(csv_field("line\nbreak") == "\"line\nbreak\"");
}

BOOST_AUTO_TEST_CASE(markdown_cells_cannot_break_the_table_or_inject_html) {
  BOOST_TEST(md_cell("a|b\nc") == "a\\|b c");
  BOOST_TEST(md_cell("<img src=x>") == "&lt;img src=x&gt;");
  BOOST_TEST(md_cell("*x* [l](u) `c`") == "\\*x\\* \\[l\\](u) \\`c\\`");
}

// The runner decodes %25, %0D and %0A in a command's message, and %3A and %2C too in a
// property; a study's text must not end the value early, start another command on a new line, or
// put an escape sequence in the log.
BOOST_AUTO_TEST_CASE(github_workflow_command_values_are_percent_encoded) {
  BOOST_TEST(github_data("a%0Ab\r\nc") == "a%250Ab%0D%0Ac");
  BOOST_TEST(github_data("x\n::error::injected") == "x%0A::error::injected");
  BOOST_TEST(github_data("k: v, w") == "k: v, w");  // only properties encode : and ,
  BOOST_TEST(github_property("e/s@t[k=a,b]: x%") == "e/s@t[k=a%2Cb]%3A x%25");
  BOOST_TEST(github_property("a\r\nb") == "a%0D%0Ab");
  BOOST_TEST(github_data("\x1b[31mred\x07") == "\\x1b[31mred\\x07");
  BOOST_TEST(github_data("caf\xc3\xa9 bad\xff%") == "caf\xc3\xa9 bad\\xff%25");
}

BOOST_AUTO_TEST_SUITE_END()
