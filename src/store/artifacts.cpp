// Execute artifacts on disk (see artifacts.hpp).
#include <mira/store/artifacts.hpp>

#include <mira/protocol/json_text.hpp>
#include "store/file_helpers.hpp"

namespace mira::store {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {
// Case keys always hold '/' and '@', so no encoded key is "meta".
constexpr const char* meta_name = "meta.json";

tl::unexpected<error> fail(errc e, std::string text) {
  return tl::make_unexpected(error{make_error_code(e), std::move(text)});
}
}  // namespace

tl::expected<artifact_dir, error> artifact_dir::create(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    return fail(errc::io, "cannot create the artifacts directory " + dir.string() + ": " +
                              (ec ? ec.message() : std::string("not a directory")));
  return artifact_dir(dir);
}

tl::expected<artifact_dir, error> artifact_dir::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return fail(errc::not_found, "no artifacts directory " + dir.string() +
                                     " (make one with mira run --execute-only --artifacts DIR)");
  return artifact_dir(dir);
}

fs::path artifact_dir::file_for(const std::string& key) const {
  return path_ / (encode_key(key) + ".json");
}

boost::system::error_code artifact_dir::save(const std::string& key, const json::object& artifact) {
  return write_file_atomic(file_for(key), protocol::to_json_text(artifact) + "\n");
}

std::map<std::string, json::object> artifact_dir::load(std::vector<std::string>* unreadable) const {
  std::map<std::string, json::object> out;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(path_, ec)) {
    auto& file = entry.path();
    if (file.extension() != ".json" || file.filename() == meta_name) continue;
    auto artifact = read_json_object(file);
    auto* key = artifact ? artifact->if_contains("key") : nullptr;
    if (!key || !key->is_string()) {
      if (unreadable) unreadable->push_back(file.string());
      continue;
    }
    std::string k(key->get_string());
    out.emplace(std::move(k), std::move(*artifact));
  }
  return out;
}

boost::system::error_code artifact_dir::save_meta(const json::object& meta) {
  return write_file_atomic(path_ / meta_name, protocol::to_json_text(meta) + "\n");
}

std::optional<json::object> artifact_dir::load_meta() const {
  return read_json_object(path_ / meta_name);
}

}  // namespace mira::store
