// Execute artifacts on disk: one ExecuteResult per case (the full transcript, trajectory
// included) in <dir>/<encoded key>.json, plus <dir>/meta.json naming the study that made them.
// Written by `mira run --execute-only`, replayed through `score` by `mira score`. Every file is
// written atomically; one that does not parse is reported and its case executed again.
#pragma once

#include <mira/store/error.hpp>
#include <mira/store/files.hpp>

#include <boost/json/object.hpp>
#include <tl/expected.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace mira::store {

class artifact_dir {
 public:
  /// The directory, created when missing. Fails with errc::io.
  static tl::expected<artifact_dir, error> create(const std::filesystem::path& dir);
  /// An existing directory (for scoring). Fails with errc::not_found when there is none.
  static tl::expected<artifact_dir, error> open(const std::filesystem::path& dir);

  const std::filesystem::path& path() const { return path_; }

  /// Where save() puts a case's artifact (for writing it through a batch_writer).
  std::filesystem::path file_for(const std::string& key) const;
  /// Saves one case's ExecuteResult; `artifact` must carry the host's "key" field.
  boost::system::error_code save(const std::string& key, const boost::json::object& artifact);
  /// Every readable artifact, by key. Files that do not parse or name no key are listed in
  /// `unreadable`.
  std::map<std::string, boost::json::object> load(
      std::vector<std::string>* unreadable = nullptr) const;

  boost::system::error_code save_meta(const boost::json::object& meta);
  std::optional<boost::json::object> load_meta() const;

 private:
  explicit artifact_dir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace mira::store
