// The word splitter for study command lines (see command_line.hpp).
#include <mira/command_line.hpp>

namespace mira {

namespace {

class command_line_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.command_line"; }
  std::string message(int e) const override {
    switch (static_cast<command_line_errc>(e)) {
      case command_line_errc::unterminated_single_quote:
        return "has an unterminated ' quote";
      case command_line_errc::unterminated_double_quote:
        return "has an unterminated \" quote";
      case command_line_errc::trailing_backslash:
        return "ends with a backslash";
    }
    return "cannot be split";
  }
};

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\n';
}

}  // namespace

const boost::system::error_category& command_line_category() noexcept {
  static const command_line_category_impl c;
  return c;
}

boost::system::error_code make_error_code(command_line_errc e) noexcept {
  return {static_cast<int>(e), command_line_category()};
}

tl::expected<std::vector<std::string>, command_line_error> split_command_line(
    std::string_view line) {
  auto fail = [](command_line_errc e, std::size_t at) {
    return tl::make_unexpected(command_line_error{make_error_code(e), at});
  };
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // a quote pair alone starts a word, which may then be empty
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (is_blank(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\\') {
      if (i + 1 == line.size()) return fail(command_line_errc::trailing_backslash, i);
      if (line[++i] == '\n') continue;  // a continued line: neither character is kept
      word += line[i];
      in_word = true;
    } else if (c == '\'') {
      auto close = line.find('\'', i + 1);
      if (close == std::string_view::npos)
        return fail(command_line_errc::unterminated_single_quote, i);
      word.append(line.substr(i + 1, close - i - 1));
      i = close;
      in_word = true;
    } else if (c == '"') {
      const auto open = i;
      for (++i;; ++i) {
        if (i == line.size()) return fail(command_line_errc::unterminated_double_quote, open);
        if (line[i] == '"') break;
        if (line[i] == '\\' && i + 1 < line.size()) {
          const char next = line[i + 1];
          if (next == '\n') {
            ++i;
            continue;
          }
          if (next == '\\' || next == '"' || next == '$' || next == '`') {
            word += next;
            ++i;
            continue;
          }
        }
        word += line[i];
      }
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace mira
