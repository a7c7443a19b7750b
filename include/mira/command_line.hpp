// A study's command line as one string ("python3 'my study.py' --fast") split into the argv that
// study_command takes: the one word splitter of the library, used for `--study-cmd`, the
// command lines of mira.toml's launchers and the studies `mira serve` allows.
#pragma once

#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace mira {

enum class command_line_errc {
  unterminated_single_quote = 1,  // a ' with no ' after it
  unterminated_double_quote,      // a " with no unescaped " after it
  trailing_backslash,             // the line ends with a backslash outside quotes
};

const boost::system::error_category& command_line_category() noexcept;
boost::system::error_code make_error_code(command_line_errc e) noexcept;

/// Why a line could not be split, and where.
struct command_line_error {
  boost::system::error_code code;  // a command_line_errc
  std::size_t position = 0;        // byte offset of the open quote, or of the last backslash

  /// What is wrong, to follow the line's name: "has an unterminated ' quote", "has an
  /// unterminated \" quote", "ends with a backslash" (the code's message).
  std::string message() const { return code.message(); }
};

/// Splits `line` into words the way a POSIX shell splits a simple command, with no expansion:
///   - Words are separated by unquoted blanks (space, tab, newline); blanks at either end or in
///     a row make no empty word. A line of blanks only is no words (not an error).
///   - Inside '...' every character is itself, up to the next ' (so no ' inside).
///   - Inside "..." every character is itself, except that a backslash followed by \ " $ or `
///     stands for that character, and a backslash followed by a newline is removed; before any
///     other character a backslash is kept.
///   - Outside quotes a backslash makes the next character ordinary (\  is a space in a word,
///     \' a quote); a backslash followed by a newline is removed (a continued line).
///   - Quoted and unquoted parts next to each other make one word: a'b c'"d" is "ab cd"; '' and
///     "" alone are an empty word.
///   - Nothing else is special: $ ` * ? ~ # ; | & < > ( ) are ordinary characters (no variables,
///     globs, comments, operators or redirections).
/// Errors: an unterminated ' or " quote, and a backslash at the very end of the line.
tl::expected<std::vector<std::string>, command_line_error> split_command_line(
    std::string_view line);

}  // namespace mira

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::command_line_errc> : std::true_type {};
/// @endcond
