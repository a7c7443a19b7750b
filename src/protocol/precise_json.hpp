// Parsing JSON with doubles correctly rounded. Boost.JSON 1.81's parser is not (its last digit
// can change: docs/reliability.md), so a value read back from a file the host wrote, such as a
// summary's percentile, could differ from the one written. This parse reads each double's text
// with std::from_chars and is otherwise Boost.JSON's own parser: same grammar, same limits, same
// errors.
#pragma once

#include <boost/json/parse_options.hpp>
#include <boost/json/value.hpp>

#include <string_view>

namespace mira::detail {

/// The JSON value `text` (whitespace around it allowed), as boost::json::parse reads it but for
/// its doubles, each the one closest to its text. On failure `ec` is set and the value is null.
boost::json::value parse_json_precise(std::string_view text, boost::system::error_code& ec,
                                      const boost::json::parse_options& options = {});

}  // namespace mira::detail
