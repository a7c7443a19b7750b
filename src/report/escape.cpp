// Escaping for each output context (see escape.hpp).
#include <mira/report/escape.hpp>
#include "protocol/utf8.hpp"

#include <cstdio>

namespace mira::report {

namespace {

using mira::detail::utf8_length;

bool is_c1(std::string_view seq) {
  return seq.size() == 2 && static_cast<unsigned char>(seq[0]) == 0xc2 &&
         static_cast<unsigned char>(seq[1]) < 0xa0;
}

bool is_xml_nonchar(std::string_view seq) {
  return seq == "\xef\xbf\xbe" || seq == "\xef\xbf\xbf";  // U+FFFE, U+FFFF
}

// A byte XML cannot carry, written as printable() writes it: two keys that differ only there
// stay two names (a JUnit consumer would merge them).
void xml_escape_byte(std::string& out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out += buf;
}

// Markup text for XML (`xml`) or HTML: the same escapes; they differ in what they cannot carry.
// XML shows invalid UTF-8, U+FFFE/U+FFFF and C0 controls but tab/LF/CR (kept as references) as
// \xNN text; HTML shows invalid UTF-8 as U+FFFD, drops C1 and C0 controls but tab and LF.
std::string markup_text(std::string_view v, bool xml) {
  std::string out;
  out.reserve(v.size() + v.size() / 8);
  for (std::size_t i = 0; i < v.size();) {
    auto c = static_cast<unsigned char>(v[i]);
    auto n = utf8_length(v, i);
    if (n == 0) {
      if (xml)
        xml_escape_byte(out, c);
      else
        out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
      continue;
    }
    if (n > 1) {
      auto seq = v.substr(i, n);
      if (xml && is_xml_nonchar(seq))
        for (unsigned char b : seq) xml_escape_byte(out, b);
      else if (xml || !is_c1(seq))
        out.append(seq);
      i += n;
      continue;
    }
    ++i;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += xml ? "&apos;" : "&#39;";
        break;
      case '\t':
        out += xml ? "&#9;" : "\t";
        break;
      case '\n':
        out += xml ? "&#10;" : "\n";
        break;
      case '\r':
        if (xml) out += "&#13;";
        break;
      default:
        if (c >= 0x20 && c != 0x7f)
          out += static_cast<char>(c);
        else if (xml)
          xml_escape_byte(out, c);
    }
  }
  return out;
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char buf[16];
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    auto n = utf8_length(s, i);
    if (n == 0 || c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
      continue;
    }
    auto seq = s.substr(i, n);
    if (is_c1(seq)) {  // U+0080..U+009F: 8-bit controls (CSI is U+009B) to some terminals
      std::snprintf(buf, sizeof buf, "\\u{%02x}", static_cast<unsigned char>(seq[1]));
      out += buf;
    } else {
      out.append(seq);
    }
    i += n;
  }
  return out;
}

std::string csv_field(std::string_view v) {
  if (v.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(v);
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

std::string xml_text(std::string_view v) {
  return markup_text(v, true);
}

std::string html_text(std::string_view v) {
  return markup_text(v, false);
}

std::string md_cell(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (unsigned char c : v) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '\\':
        out += "\\\\";
        break;
      // Inline HTML in Markdown renders: escape it like HTML would.
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '`':
        out += "\\`";
        break;
      case '*':
        out += "\\*";
        break;
      case '_':
        out += "\\_";
        break;
      case '[':
        out += "\\[";
        break;
      case ']':
        out += "\\]";
        break;
      case '\n':
      case '\r':
      case '\t':
        out += ' ';
        break;
      default:
        if (c >= 0x20 && c != 0x7f) out += static_cast<char>(c);
    }
  }
  return out;
}

std::string safe_href(std::string_view url) {
  auto starts = [&](std::string_view p) {
    if (url.size() < p.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i)
      if ((url[i] | 0x20) != p[i]) return false;
    return true;
  };
  if (!starts("http://") && !starts("https://")) return {};
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7f) return {};  // whitespace or controls: not one URL
  return html_text(url);
}

namespace {

// `%` first of all: the runner decodes each %XX once, so a literal "%0A" must arrive as "%250A".
std::string github_text(std::string_view v, bool property) {
  std::string out, plain;
  auto flush = [&] {
    out += printable(plain);
    plain.clear();
  };
  for (char c : v) {
    const char* code = c == '%'               ? "%25"
                       : c == '\r'            ? "%0D"
                       : c == '\n'            ? "%0A"
                       : property && c == ':' ? "%3A"
                       : property && c == ',' ? "%2C"
                                              : nullptr;
    if (!code) {
      plain += c;
      continue;
    }
    flush();
    out += code;
  }
  flush();
  return out;
}

}  // namespace

std::string github_data(std::string_view v) {
  return github_text(v, false);
}

std::string github_property(std::string_view v) {
  return github_text(v, true);
}

}  // namespace mira::report
