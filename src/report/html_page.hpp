// What the library's HTML pages share (private to the library): the run report and the
// comparison of two runs look alike, self-contained pages with one stylesheet. The report layer
// owns it; compare uses it, never the reverse.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mira::report::detail {

/// `v` formatted by printf's `f`, a format taking one double ("%.1f").
std::string fmt(const char* f, double v);

/// A rate in [0, 1] as a percentage with one decimal: "97.5%".
std::string pct(double v);

/// At most `n` bytes of `s`, cut before a UTF-8 continuation byte, with an ellipsis when cut.
std::string excerpt(std::string_view s, std::size_t n);

/// A page's beginning, through `<body>`: a Content-Security-Policy admitting nothing but inline
/// styles, data: images and, when `script_src` is not empty, the scripts it names; the escaped
/// `title`; the shared stylesheet followed by the page's own rules (`style`).
std::string html_page_start(std::string_view title, std::string_view style,
                            std::string_view script_src = {});

/// An inline SVG chart's opening tag, `width` by `height` pixels, headed by `title` (escaped).
std::string svg_chart_start(int width, int height, std::string_view title);

/// A chart row's group opened with its label: the whole label as the tooltip, its first 24
/// bytes shown with their baseline at `text_y`.
std::string svg_row_label(std::string_view label, int text_y);

/// An interval from x `lo` to x `hi` for the row at `y`: a line at y+12 with ticks from y+6 to
/// y+18.
std::string svg_whisker(double lo, double hi, int y);

}  // namespace mira::report::detail
