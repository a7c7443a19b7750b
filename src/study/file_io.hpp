// Reading a whole file under a size bound, for the study layer's file helpers (seeded files'
// sources, parts read from a file): one place that says what failed and names the file.
#pragma once

#include <mira/study/error.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <filesystem>
#include <string>

namespace mira::study::detail {

/// An error of this kind with its message.
inline error fail(errc code, std::string text) {
  return {make_error_code(code), std::move(text)};
}

/// The file's bytes, read whole. file_unreadable when it cannot be opened or read or is not a
/// regular file (a FIFO would block), file_too_large when it holds more than `max_bytes`.
tl::expected<std::string, error> read_bounded(const std::filesystem::path& file,
                                              std::size_t max_bytes);

}  // namespace mira::study::detail
