// Study-provided text made safe for each place it is shown: a terminal, CSV, XML, Markdown,
// HTML. A study's names and messages are arbitrary bytes; none of these may let them change
// the structure of what the host writes.
#pragma once

#include <string>
#include <string_view>

namespace mira::report {

/// For a terminal: C0/C1 controls, DEL and invalid UTF-8 bytes shown as `\xNN` (or `\u{NN}` for
/// C1), so no escape sequence reaches the terminal.
std::string printable(std::string_view s);

/// An RFC 4180 field: quoted when it holds a comma, a quote or a line break; quotes doubled.
std::string csv_field(std::string_view v);

/// XML 1.0 content or attribute value: markup escaped, each byte of what XML cannot carry (C0
/// controls but tab/LF/CR, U+FFFE, U+FFFF, invalid UTF-8) written as `\xNN` text, so distinct
/// keys keep distinct names; tab/LF/CR as character references.
std::string xml_text(std::string_view v);

/// A Markdown table cell: pipes and backslashes escaped, markup characters escaped, line breaks
/// folded into spaces, control characters dropped.
std::string md_cell(std::string_view v);

/// HTML text or a double-quoted attribute value: & < > " ' escaped, controls but tab and line
/// feed dropped, invalid UTF-8 replaced by U+FFFD.
std::string html_text(std::string_view v);

/// A GitHub Actions workflow command's message (what follows the second `::`): `%`, CR and LF
/// percent-encoded as the runner decodes them (a line break stays one in the annotation), every
/// other control character and invalid UTF-8 shown as printable() shows them.
std::string github_data(std::string_view v);

/// A workflow command's property value (`title=...`): github_data() with `:` and `,` encoded
/// too, which would end the value.
std::string github_property(std::string_view v);

/// An href for a study-provided URL: the escaped URL when its scheme is http or https, else
/// empty (javascript:, data: and the like are never linked).
std::string safe_href(std::string_view url);

}  // namespace mira::report
