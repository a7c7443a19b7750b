// A saved run on disk (see run_folder.hpp).
#include "store/run_folder.hpp"

#include <mira/protocol/json_text.hpp>
#include <mira/store/records.hpp>
#include "store/batch_writer.hpp"
#include "store/file_helpers.hpp"

#include <boost/json/parse.hpp>

namespace mira::store {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

tl::unexpected<error> fail(errc e, std::string text) {
  return tl::make_unexpected(error{make_error_code(e), std::move(text)});
}

}  // namespace

tl::expected<run_folder, error> run_folder::create(const fs::path& results_dir,
                                                   const std::string& run_id) {
  if (auto why = invalid_run_id(run_id))
    return fail(errc::invalid_id, "run id \"" + run_id + "\": " + *why);
  std::error_code ec;
  fs::create_directories(results_dir, ec);
  if (ec) return fail(errc::io, "cannot create " + results_dir.string() + ": " + ec.message());
  auto path = results_dir / run_id;
  if (!fs::create_directory(path, ec) || ec)
    return fail(ec ? errc::io : errc::exists, "cannot create run folder " + path.string() + ": " +
                                                  (ec ? ec.message() : std::string("it exists")));
  fs::create_directory(path / "cases", ec);
  if (ec) return fail(errc::io, "cannot create " + (path / "cases").string() + ": " + ec.message());
  return run_folder(std::move(path), run_id);
}

tl::expected<run_folder, error> run_folder::open(const fs::path& results_dir,
                                                 const std::string& run_id) {
  if (auto why = invalid_run_id(run_id))
    return fail(errc::invalid_id, "run id \"" + run_id + "\": " + *why);
  auto path = results_dir / run_id;
  std::error_code ec;
  if (!fs::is_directory(path / "cases", ec))
    return fail(errc::not_found, "no saved run \"" + run_id + "\" in " + results_dir.string());
  return run_folder(std::move(path), run_id);
}

fs::path run_folder::case_file(const std::string& key) const {
  return path_ / "cases" / encode_key(key) / "result.json";
}

boost::system::error_code run_folder::save_case(const std::string& key,
                                                const json::object& record) {
  // As batch_writer writes it: beneath the run folder, never through a link.
  batch_writer writer(path_, 1);
  boost::system::error_code out;
  writer.submit(case_file(key), protocol::to_json_text(record) + "\n",
                [&out](boost::system::error_code ec) { out = ec; });
  writer.drain();
  return out;
}

void run_folder::walk_cases(const case_visitor& good, std::vector<std::string>* unreadable,
                            std::unordered_map<std::string, fs::path>* foreign_dirs,
                            bool remove_temporaries) const {
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(path_ / "cases", ec)) {
    auto file = entry.path() / "result.json";
    std::error_code ignored;
    // A link is neither read nor cleaned: what it points to is not the run's.
    if (entry.is_symlink(ignored)) {
      if (unreadable) unreadable->push_back(detail::open_failure(entry.path(), ELOOP));
      continue;
    }
    // A host killed while saving leaves a temporary file (and perhaps no result.json): that
    // case was not saved.
    if (remove_temporaries)
      for (auto& f : fs::directory_iterator(entry.path(), ignored))
        if (f.path().filename().string().rfind(".result.json.tmp-", 0) == 0)
          fs::remove(f.path(), ignored);
    const auto status = fs::symlink_status(file, ignored);
    if (!fs::exists(status)) continue;
    if (fs::is_symlink(status)) {
      if (unreadable) unreadable->push_back(detail::open_failure(file, ELOOP));
      continue;
    }
    auto record = read_json_object(file);
    if (!record) {
      if (unreadable)
        unreadable->push_back(file.string() + ": not a JSON object (torn or foreign)");
      continue;
    }
    auto key = key_of(*record);
    if (!key) {
      if (unreadable)
        unreadable->push_back(file.string() + ": no case identity (eval, sample, target)");
      continue;
    }
    // A folder names its case: a record in another case's folder (copied there) is not read as
    // either case's. The Rust host names folders in its own encoding (decode_key reads it).
    const auto name = entry.path().filename().string();
    if (name != encode_key(*key)) {
      if (decode_key(name) != *key) {
        if (unreadable)
          unreadable->push_back(file.string() + ": the record is of case " + *key +
                                ", not of the case its folder names (" +
                                decode_key(name).value_or(name) + ")");
        continue;
      }
      if (foreign_dirs) (*foreign_dirs)[*key] = entry.path();
    }
    (*record)["key"] = *key;
    good(std::move(*key), entry.path(), std::move(*record));
  }
}

std::map<std::string, json::object> run_folder::load_cases(
    std::vector<std::string>* unreadable, std::unordered_map<std::string, fs::path>* foreign_dirs,
    bool remove_temporaries) const {
  std::map<std::string, json::object> out;
  walk_cases([&](std::string key, const fs::path&,
                 json::object record) { out.insert_or_assign(std::move(key), std::move(record)); },
             unreadable, foreign_dirs, remove_temporaries);
  return out;
}

boost::system::error_code run_folder::save_meta(const json::object& meta) {
  return write_file_atomic(path_ / "meta.json", protocol::to_json_text(meta) + "\n");
}

std::optional<json::object> run_folder::load_meta() const {
  return read_json_object(path_ / "meta.json");
}

}  // namespace mira::store
