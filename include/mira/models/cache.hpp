// A local response cache: identical provider requests answered from a folder instead of the
// provider, so a repeated run (a re-score, a resumed or rerun study, a retried case) costs no
// tokens and gives the same answers. Content-addressed: an entry's file name is the SHA-256 of
// the request's canonical JSON (API, base URL, and the body: model, messages, parameters; never
// the key or any header).
#pragma once

#include <boost/json/value.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace mira::models {

/// What a cache does.
enum class cache_mode {
  off,         ///< nothing: every request goes to the provider
  read_only,   ///< answers from the entries there, adds none
  read_write,  ///< answers from the entries there, and adds each new successful answer
};

/// A cache folder and its mode. Cheap to copy; any copy may be used from any thread, and any
/// number of processes may share one folder.
///
/// An entry is written to a temporary file in its folder and renamed into place, so a reader
/// sees a whole entry or none, and two writers of one entry leave one of theirs. An entry that
/// cannot be read back whole (torn by a crash, edited, of another format) is a miss, never an
/// error; so is a folder that cannot be read. A write that fails leaves the entry out. Entries
/// are never expired: remove the folder (or its files) to forget them.
class response_cache {
 public:
  /// Off.
  response_cache() = default;
  response_cache(std::filesystem::path folder, cache_mode mode = cache_mode::read_write);

  /// From the environment: MIRA_CACHE_DIR names the folder (no cache when unset or empty),
  /// MIRA_CACHE_MODE the mode: `read-write` (the default), `read-only` or `off`. Throws
  /// std::invalid_argument for another mode, naming the three.
  static response_cache from_environment();

  cache_mode mode() const noexcept { return mode_; }
  const std::filesystem::path& folder() const noexcept { return folder_; }

  /// The value stored under `key`, if the mode reads and an entry for it is there, whole.
  std::optional<std::string> find(std::string_view key) const;
  /// Stores `value` under `key` when the mode writes; whether it was written.
  bool store(std::string_view key, std::string_view value) const;
  /// Where the entry of `key` is: the folder, then the first two hex digits of the key's
  /// SHA-256, then all 64 of them with `.json`.
  std::filesystem::path entry_path(std::string_view key) const;

 private:
  std::filesystem::path folder_;
  cache_mode mode_ = cache_mode::off;
};

/// A value as canonical JSON text: object members sorted by name (byte order), no whitespace,
/// numbers and strings as Boost.JSON writes them. Equal values give equal text.
std::string canonical_json(const boost::json::value& v);

/// The SHA-256 of `bytes`, as 64 lower-case hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace mira::models
