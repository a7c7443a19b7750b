// Sans-I/O NDJSON framer: bytes in, complete lines out. Blank lines are skipped, a trailing CR
// is stripped, and a line longer than the limit is discarded as it streams in (memory stays
// bounded by the limit plus one read chunk) and reported once with an excerpt.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mira::detail {

class line_framer {
 public:
  enum class frame_kind { line, overlong, partial };
  struct frame {
    frame_kind kind = frame_kind::line;
    std::string_view text;  // the line (line / partial) or an excerpt (overlong)
    std::size_t size = 0;   // full size in bytes of the line, without the newline
  };

  explicit line_framer(std::size_t max_line = std::size_t{64} << 20,
                       std::size_t read_chunk = std::size_t{64} << 10);

  /// Writable space for the next read (at least one read chunk). Invalidates earlier frames.
  std::span<char> prepare();
  void commit(std::size_t n);

  /// The next complete line, or an overlong report; nullopt when more input is needed.
  /// Views stay valid until the next prepare().
  std::optional<frame> next();

  /// At end of input: an unterminated, non-blank tail (partial) or overlong report.
  std::optional<frame> finish();

  std::size_t max_line() const { return max_line_; }
  std::size_t buffered() const { return end_ - begin_; }
  /// Newline-terminated lines received and not yet returned by next() (blank ones included).
  std::size_t lines_buffered() const { return newlines_; }

 private:
  std::vector<char> buf_;
  std::size_t begin_ = 0;     // start of the current (incomplete) line
  std::size_t scan_ = 0;      // where the search for '\n' resumes
  std::size_t end_ = 0;       // end of valid data
  std::size_t newlines_ = 0;  // in [scan_, end_)
  std::size_t max_line_;
  std::size_t chunk_;
  bool discarding_ = false;
  std::size_t discarded_ = 0;
  std::string excerpt_;
};

/// At most `max` bytes of `text` made printable: control bytes and bytes that are not UTF-8
/// shown as `\xNN`, and never a character cut in two, so the excerpt is safe in a terminal, a
/// log file and JSON. Marks truncation with "...".
std::string excerpt(std::string_view text, std::size_t max = 200);

}  // namespace mira::detail
