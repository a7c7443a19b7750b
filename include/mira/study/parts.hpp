// Multimodal part builders: text, image, audio and file parts (protocol::part) from bytes or from
// a file, carried inline as base64 (a data: URI by default), and their JSON form for a sample's
// input. A sample whose input is one user message with a text and an image:
//
//   auto cat = study::parts::image_file("cat.png");       // tl::expected<protocol::part, error>
//   if (!cat) return fail(cat.error().message());
//   s.input = {study::parts::message("user", {study::parts::text("What is this?"), *cat})};
#pragma once

#include <mira/protocol/types.hpp>
#include <mira/study/error.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mira::study::parts {

namespace json = boost::json;

/// How a part's bytes are carried: the protocol allows a `source` of `{"uri": "data:...;base64,
/// ..."}` or `{"data": "<base64>"}`.
enum class inline_as {
  data_uri,  ///< source.uri = "data:<media type>;base64,<bytes>" (what provider APIs take)
  base64,    ///< source.data = "<bytes in base64>"
};

/// How a part is made from a file.
struct file_options {
  /// The media type; empty: from the file name's extension (media_type_of).
  std::string media_type{};
  /// A larger file is refused with errc::file_too_large (20 MiB: what the largest provider
  /// image inputs take).
  std::size_t max_bytes = std::size_t{20} << 20;
  inline_as encoding = inline_as::data_uri;
};

/// The media type a file name's extension says (case ignored): png, jpg/jpeg/jfif, gif, webp,
/// bmp, svg, tif/tiff, heic; wav, mp3/mpga, ogg/oga, opus, flac, m4a, aac, weba; pdf, txt, md,
/// csv, tsv, json, jsonl, htm/html, xml, yaml/yml, zip, gz, tar; an empty string for any other.
std::string media_type_of(const std::filesystem::path& file);

/// Base64 (RFC 4648, with padding) of `bytes`.
std::string base64(std::string_view bytes);

/// A text part.
protocol::part text(std::string text);
/// A JSON part.
protocol::part json_value(json::value value);
/// An image, audio or file part referencing its bytes by URL (http(s) or data:).
protocol::part image_uri(std::string media_type, std::string uri);
protocol::part audio_uri(std::string media_type, std::string uri);
/// A file part: `name` is what a reader shows for it (the file name).
protocol::part file_uri(std::string name, std::string media_type, std::string uri);

/// The same with the bytes inline.
protocol::part image_bytes(std::string_view bytes, std::string media_type,
                           inline_as encoding = inline_as::data_uri);
protocol::part audio_bytes(std::string_view bytes, std::string media_type,
                           inline_as encoding = inline_as::data_uri);
protocol::part file_bytes(std::string name, std::string_view bytes, std::string media_type,
                          inline_as encoding = inline_as::data_uri);

/// A part from a file's bytes, read whole (blocking file I/O: in a subject, through
/// run_context::blocking). Errors: file_unreadable, file_too_large, and unknown_media_type when
/// the media type is unknown (no options.media_type and an extension media_type_of does not
/// know) or of another kind (an image_file of a .pdf).
tl::expected<protocol::part, error> image_file(const std::filesystem::path& file,
                                               const file_options& options = {});
tl::expected<protocol::part, error> audio_file(const std::filesystem::path& file,
                                               const file_options& options = {});
/// A file part named after the file; an unknown media type is application/octet-stream.
tl::expected<protocol::part, error> attachment(const std::filesystem::path& file,
                                               const file_options& options = {});

/// A part's JSON form, as a sample's input or a transcript's output carries it: kind, then text,
/// json, or name (when set), media_type and source ({"uri"} or {"data"}).
json::object to_json(const protocol::part& p);
/// A message `{"role": role, "content": [parts...]}`, one input turn of several parts.
json::object message(std::string_view role, const std::vector<protocol::part>& content);

}  // namespace mira::study::parts
