// The shared beginning of the library's HTML pages (html_page.hpp).
#include "report/html_page.hpp"

#include <mira/report/escape.hpp>

#include <cmath>
#include <cstdio>

namespace mira::report::detail {

namespace {

// Page text, cards, tables and charts as both pages draw them.
const char* const shared_style = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#5b6475;margin-bottom:16px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:10px 14px;min-width:110px}
.card b{display:block;font-size:20px}.card span{color:#5b6475;font-size:12px}
table{border-collapse:collapse;background:#fff}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f2f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
.chart{background:#fff;border:1px solid #dde1e8;border-radius:8px;padding:8px}
)";

}  // namespace

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pct(double v) {
  // As the console's percent(): a rate below 1 never reads 100%, one above 0 never 0%.
  double p = v * 100;
  if (p < 100 && std::round(p * 10) >= 1000) p = 99.9;
  if (p > 0 && std::round(p * 10) <= 0) p = 0.1;
  return fmt("%.1f%%", p);
}

std::string excerpt(std::string_view s, std::size_t n) {
  if (s.size() <= n) return std::string(s);
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "…";
}

std::string html_page_start(std::string_view title, std::string_view style,
                            std::string_view script_src) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:";
  if (!script_src.empty()) out.append("; script-src ").append(script_src);
  out += "\"><meta name=\"viewport\" content=\"width=device-width\"><title>" + html_text(title) +
         "</title><style>" + shared_style;
  out.append(style).append("</style></head><body>\n");
  return out;
}

std::string svg_chart_start(int width, int height, std::string_view title) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
         "\" height=\"" + std::to_string(height) +
         "\" role=\"img\"><text x=\"4\" y=\"18\" font-weight=\"600\">" + html_text(title) +
         "</text>";
}

std::string svg_row_label(std::string_view label, int text_y) {
  return "<g><title>" + html_text(label) + "</title><text x=\"4\" y=\"" + std::to_string(text_y) +
         "\">" + html_text(excerpt(label, 24)) + "</text>";
}

std::string svg_whisker(double lo, double hi, int y) {
  const auto l = fmt("%.1f", lo), h = fmt("%.1f", hi), mid = std::to_string(y + 12);
  const auto tick_top = std::to_string(y + 6), tick_bottom = std::to_string(y + 18);
  std::string out;
  out.append("<path d=\"M").append(l).append(" ").append(mid).append("H").append(h);
  out.append("M").append(l).append(" ").append(tick_top).append("V").append(tick_bottom);
  out.append("M").append(h).append(" ").append(tick_top).append("V").append(tick_bottom);
  out.append("\" stroke=\"#1d2330\" fill=\"none\"/>");
  return out;
}

}  // namespace mira::report::detail
