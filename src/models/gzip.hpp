// Inflating a gzip body within a bound (zlib): the HTTP client's Content-Encoding: gzip.
#pragma once

#include <mira/models/error.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace mira::models::detail {

/// Inflates `in`, one gzip member or several back to back (RFC 1952), into at most `max` bytes:
/// errc::body_too_large once the output would pass `max` (no more than `max` is ever held),
/// errc::malformed_response for data that is not gzip, is corrupt or ends early.
tl::expected<std::string, errc> gunzip(std::string_view in, std::size_t max);

}  // namespace mira::models::detail
