// Multimodal part builders (see parts.hpp).
#include <mira/study/parts.hpp>

#include "study/file_io.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace mira::study::parts {

namespace {

struct extension_type {
  std::string_view extension;
  std::string_view media_type;
};

// Sorted by extension, for a binary search.
constexpr std::array<extension_type, 36> known_types{{
    {"aac", "audio/aac"},         {"bmp", "image/bmp"},
    {"csv", "text/csv"},          {"flac", "audio/flac"},
    {"gif", "image/gif"},         {"gz", "application/gzip"},
    {"heic", "image/heic"},       {"htm", "text/html"},
    {"html", "text/html"},        {"jfif", "image/jpeg"},
    {"jpeg", "image/jpeg"},       {"jpg", "image/jpeg"},
    {"json", "application/json"}, {"jsonl", "application/jsonl"},
    {"m4a", "audio/mp4"},         {"md", "text/markdown"},
    {"mp3", "audio/mpeg"},        {"mpga", "audio/mpeg"},
    {"oga", "audio/ogg"},         {"ogg", "audio/ogg"},
    {"opus", "audio/opus"},       {"pdf", "application/pdf"},
    {"png", "image/png"},         {"svg", "image/svg+xml"},
    {"tar", "application/x-tar"}, {"tif", "image/tiff"},
    {"tiff", "image/tiff"},       {"tsv", "text/tab-separated-values"},
    {"txt", "text/plain"},        {"wav", "audio/wav"},
    {"weba", "audio/webm"},       {"webp", "image/webp"},
    {"xml", "application/xml"},   {"yaml", "application/yaml"},
    {"yml", "application/yaml"},  {"zip", "application/zip"},
}};
static_assert(std::is_sorted(known_types.begin(), known_types.end(),
                             [](const extension_type& a, const extension_type& b) {
                               return a.extension < b.extension;
                             }));

protocol::part media(std::string kind, std::string media_type, std::string_view bytes,
                     inline_as encoding) {
  protocol::part p;
  p.kind = std::move(kind);
  if (encoding == inline_as::data_uri)
    p.uri = "data:" + media_type + ";base64," + base64(bytes);
  else
    p.data = base64(bytes);
  p.media_type = std::move(media_type);
  return p;
}

// The media type for a file of this kind ("image", "audio", or "" for any), or why there is none.
tl::expected<std::string, error> type_for(const std::filesystem::path& file, const file_options& o,
                                          std::string_view kind) {
  auto type = o.media_type.empty() ? media_type_of(file) : o.media_type;
  if (type.empty()) {
    if (kind.empty()) return std::string("application/octet-stream");
    return tl::make_unexpected(detail::fail(
        errc::unknown_media_type, "cannot tell the media type of " + file.string() +
                                      " from its extension: give file_options::media_type"));
  }
  if (!kind.empty() && type.compare(0, kind.size() + 1, std::string(kind) + "/") != 0)
    return tl::make_unexpected(
        detail::fail(errc::unknown_media_type, file.string() + " is " + type + ", not " +
                                                   std::string(kind == "image" ? "an " : "") +
                                                   std::string(kind)));
  return type;
}

}  // namespace

std::string media_type_of(const std::filesystem::path& file) {
  auto ext = file.extension().string();
  if (ext.size() < 2) return {};
  std::string lower;
  for (char c : std::string_view(ext).substr(1))
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto it = std::lower_bound(
      known_types.begin(), known_types.end(), lower,
      [](const extension_type& t, const std::string& e) { return t.extension < e; });
  if (it == known_types.end() || it->extension != lower) return {};
  return std::string(it->media_type);
}

std::string base64(std::string_view bytes) {
  static constexpr char digits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) {
    return static_cast<unsigned>(static_cast<unsigned char>(bytes[k]));
  };
  for (; i + 2 < bytes.size(); i += 3) {
    unsigned v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out += digits[(v >> shift) & 63];
  }
  if (i < bytes.size()) {
    unsigned v = byte(i) << 16;
    bool two = i + 1 < bytes.size();
    if (two) v |= byte(i + 1) << 8;
    out += digits[(v >> 18) & 63];
    out += digits[(v >> 12) & 63];
    out += two ? digits[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

protocol::part text(std::string text) {
  protocol::part p;
  p.kind = "text";
  p.text = std::move(text);
  return p;
}

protocol::part json_value(json::value value) {
  protocol::part p;
  p.kind = "json";
  p.json = std::move(value);
  return p;
}

protocol::part image_uri(std::string media_type, std::string uri) {
  protocol::part p;
  p.kind = "image";
  p.media_type = std::move(media_type);
  p.uri = std::move(uri);
  return p;
}

protocol::part audio_uri(std::string media_type, std::string uri) {
  auto p = image_uri(std::move(media_type), std::move(uri));
  p.kind = "audio";
  return p;
}

protocol::part file_uri(std::string name, std::string media_type, std::string uri) {
  auto p = image_uri(std::move(media_type), std::move(uri));
  p.kind = "file";
  p.name = std::move(name);
  return p;
}

protocol::part image_bytes(std::string_view bytes, std::string media_type, inline_as encoding) {
  return media("image", std::move(media_type), bytes, encoding);
}

protocol::part audio_bytes(std::string_view bytes, std::string media_type, inline_as encoding) {
  return media("audio", std::move(media_type), bytes, encoding);
}

protocol::part file_bytes(std::string name, std::string_view bytes, std::string media_type,
                          inline_as encoding) {
  auto p = media("file", std::move(media_type), bytes, encoding);
  p.name = std::move(name);
  return p;
}

tl::expected<protocol::part, error> image_file(const std::filesystem::path& file,
                                               const file_options& options) {
  auto type = type_for(file, options, "image");
  if (!type) return tl::make_unexpected(std::move(type.error()));
  auto bytes = detail::read_bounded(file, options.max_bytes);
  if (!bytes) return tl::make_unexpected(std::move(bytes.error()));
  return image_bytes(*bytes, std::move(*type), options.encoding);
}

tl::expected<protocol::part, error> audio_file(const std::filesystem::path& file,
                                               const file_options& options) {
  auto type = type_for(file, options, "audio");
  if (!type) return tl::make_unexpected(std::move(type.error()));
  auto bytes = detail::read_bounded(file, options.max_bytes);
  if (!bytes) return tl::make_unexpected(std::move(bytes.error()));
  return audio_bytes(*bytes, std::move(*type), options.encoding);
}

tl::expected<protocol::part, error> attachment(const std::filesystem::path& file,
                                               const file_options& options) {
  auto type = type_for(file, options, "");
  if (!type) return tl::make_unexpected(std::move(type.error()));
  auto bytes = detail::read_bounded(file, options.max_bytes);
  if (!bytes) return tl::make_unexpected(std::move(bytes.error()));
  return file_bytes(file.filename().string(), *bytes, std::move(*type), options.encoding);
}

json::object to_json(const protocol::part& p) {
  json::object o;
  o["kind"] = p.kind;
  if (!p.text.empty() || p.kind == "text") o["text"] = p.text;
  if (p.json) o["json"] = *p.json;
  if (!p.name.empty()) o["name"] = p.name;
  if (!p.media_type.empty()) o["media_type"] = p.media_type;
  if (p.uri)
    o["source"] = json::object{{"uri", *p.uri}};
  else if (p.data)
    o["source"] = json::object{{"data", *p.data}};
  return o;
}

json::object message(std::string_view role, const std::vector<protocol::part>& content) {
  json::array parts;
  parts.reserve(content.size());
  for (auto& p : content) parts.emplace_back(to_json(p));
  return {{"role", role}, {"content", std::move(parts)}};
}

}  // namespace mira::study::parts
