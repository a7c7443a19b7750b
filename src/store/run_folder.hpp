// A saved run on disk: <results>/<run_id>/meta.json and cases/<encoded key>/result.json, every
// file written atomically, so a host killed at any moment leaves a folder that resumes.
#pragma once

#include <mira/store/error.hpp>
#include <mira/store/files.hpp>

#include <boost/json/object.hpp>
#include <tl/expected.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace mira::store {

class run_folder {
 public:
  /// A new run folder `results_dir/run_id` (the results directory is created when missing).
  /// Fails with errc::invalid_id, errc::exists (the folder is there already) or errc::io.
  static tl::expected<run_folder, error> create(const std::filesystem::path& results_dir,
                                                const std::string& run_id);
  /// An existing run folder, for --resume. Fails with errc::invalid_id, or errc::not_found when
  /// it has no cases/ folder.
  static tl::expected<run_folder, error> open(const std::filesystem::path& results_dir,
                                              const std::string& run_id);

  const std::filesystem::path& path() const { return path_; }
  const std::string& id() const { return id_; }

  /// Where save_case() puts a case's record (for writing it through a batch_writer).
  std::filesystem::path case_file(const std::string& key) const;
  /// Saves one finished case (its JSON record, which must carry "key").
  boost::system::error_code save_case(const std::string& key, const boost::json::object& record);
  /// Every saved case record, by key (store::key_of: a record the Rust mira CLI saved gains
  /// "key"). A file that does not parse, or has no case identity, is listed in `unreadable`
  /// ("<file>: <why>") and left alone: its case is simply run again. `foreign_dirs` gets the
  /// folder of each key saved under another name than encode_key() gives (the Rust host's
  /// encoding). With `remove_temporaries` (a writer's load), temporary files left by a host
  /// killed while saving are removed.
  std::map<std::string, boost::json::object> load_cases(
      std::vector<std::string>* unreadable = nullptr,
      std::unordered_map<std::string, std::filesystem::path>* foreign_dirs = nullptr,
      bool remove_temporaries = true) const;

  /// What load_cases() reads, one case at a time and in no particular order: `good` gets each
  /// readable record's key, its folder and the record (with "key").
  using case_visitor = std::function<void(std::string key, const std::filesystem::path& dir,
                                          boost::json::object record)>;
  void walk_cases(const case_visitor& good, std::vector<std::string>* unreadable = nullptr,
                  std::unordered_map<std::string, std::filesystem::path>* foreign_dirs = nullptr,
                  bool remove_temporaries = true) const;

  boost::system::error_code save_meta(const boost::json::object& meta);
  std::optional<boost::json::object> load_meta() const;

 private:
  run_folder(std::filesystem::path path, std::string id)
      : path_(std::move(path)), id_(std::move(id)) {}

  std::filesystem::path path_;
  std::string id_;
};

}  // namespace mira::store
