// Sans-I/O NDJSON framer (see line_framer.hpp).
#include "framing/line_framer.hpp"
#include "protocol/utf8.hpp"

#include <algorithm>
#include <cstring>

namespace mira::detail {

namespace {

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

line_framer::line_framer(std::size_t max_line, std::size_t read_chunk)
    : max_line_(max_line), chunk_(read_chunk) {}

std::span<char> line_framer::prepare() {
  if (buf_.size() - end_ < chunk_) {
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      scan_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() - end_ < chunk_) buf_.resize(end_ + chunk_);
  }
  return {buf_.data() + end_, buf_.size() - end_};
}

void line_framer::commit(std::size_t n) {
  // memchr, not std::count: it crosses a line's bytes in a few vector steps.
  const char* p = buf_.data() + end_;
  const char* stop = p + n;
  while (auto* nl =
             static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(stop - p)))) {
    ++newlines_;
    p = nl + 1;
  }
  end_ += n;
}

std::optional<line_framer::frame> line_framer::next() {
  for (;;) {
    const char* base = buf_.data();
    const void* nl = scan_ < end_ ? std::memchr(base + scan_, '\n', end_ - scan_) : nullptr;
    if (!nl) {
      scan_ = end_;
      std::size_t pending = end_ - begin_;
      if (discarding_ || pending > max_line_) {
        // Stream the runaway line away instead of buffering it.
        if (!discarding_) {
          excerpt_ = excerpt({base + begin_, pending});
          discarding_ = true;
          discarded_ = 0;
        }
        discarded_ += pending;
        begin_ = scan_ = end_ = 0;
      }
      return std::nullopt;
    }
    std::size_t pos = static_cast<const char*>(nl) - base;
    std::string_view line(base + begin_, pos - begin_);
    begin_ = scan_ = pos + 1;
    --newlines_;
    if (discarding_) {
      discarding_ = false;
      return frame{frame_kind::overlong, excerpt_, discarded_ + line.size()};
    }
    if (line.size() > max_line_) {
      excerpt_ = excerpt(line);
      return frame{frame_kind::overlong, excerpt_, line.size()};
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (is_blank(line)) continue;
    return frame{frame_kind::line, line, line.size()};
  }
}

std::optional<line_framer::frame> line_framer::finish() {
  if (discarding_) {
    discarding_ = false;
    return frame{frame_kind::overlong, excerpt_, discarded_ + (end_ - begin_)};
  }
  std::string_view tail(buf_.data() + begin_, end_ - begin_);
  begin_ = scan_ = end_ = 0;
  newlines_ = 0;
  if (is_blank(tail)) return std::nullopt;
  return frame{frame_kind::partial, tail, tail.size()};
}

std::string excerpt(std::string_view text, std::size_t max) {
  std::string out;
  out.reserve(std::min(text.size(), max) + 8);
  static constexpr char hex[] = "0123456789abcdef";
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  std::size_t i = 0;
  while (i < text.size() && i < max) {
    const auto n = utf8_length(text, i);
    const auto c = static_cast<unsigned char>(text[i]);
    // C0 and C1 controls, DEL and bytes that are not UTF-8: a terminal would act on them.
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7f))) {
      escape(c);
      ++i;
    } else if (c1 && i + 2 <= max) {
      escape(c);
      escape(static_cast<unsigned char>(text[i + 1]));
      i += 2;
    } else if (!c1 && i + n <= max) {  // a character: whole, or not at all
      out.append(text, i, n);
      i += n;
    } else {
      break;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace mira::detail
