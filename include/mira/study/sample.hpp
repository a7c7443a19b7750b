// A study's samples: what one case of an eval is about (its input, the expected answer and the
// files its subject starts from) and what `list` says of it.
#pragma once

#include <mira/protocol/types.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mira::study {

namespace json = boost::json;

/// A file a sample seeds its subject's work folder with (Rust `Sample::file`): its path in that
/// folder, and its contents or the file they are read from when the case runs (never when the
/// sample is listed). seed_files.hpp checks paths and writes them into a folder.
struct seed_file {
  /// Relative to the work folder, '/'-separated: no leading '/', no "." or ".." component, no
  /// empty one (check_seed_path says what is wrong with one).
  std::string path{};
  /// The contents, when `source` is unset.
  std::string contents{};
  /// The file the contents are read from, when set (a dataset's `source`, joined to the
  /// dataset's folder).
  std::optional<std::string> source{};
};

/// One sample of an eval. Only `id` is required; `input` and `expected` reach the subject (via
/// its run_context) and the scorers, and are copied into each run result so that a saved result
/// says what was asked; `tags` and `metadata` are listed for the host's selection and grouping;
/// `files` reach the subject only.
struct sample {
  // Each member has an initializer, so that `{"id"}` and `{"id", input}` leave the rest out
  // without -Wmissing-field-initializers.
  std::string id{};
  /// The input turns: strings, multimodal parts (protocol::part's JSON form, parts.hpp builds
  /// them) or messages `{"role": ..., "content": string or parts}`.
  json::array input{};
  /// The reference answer, when the dataset has one (matches_expected compares with it).
  std::optional<json::value> expected{};
  std::vector<std::string> tags{};
  json::object metadata{};
  /// Files to seed the subject's work folder with (materialize_files writes them).
  std::vector<seed_file> files{};

  /// Adds a seeded file of these contents.
  sample& file(std::string path, std::string contents) {
    files.push_back({std::move(path), std::move(contents), std::nullopt});
    return *this;
  }
  /// Adds a seeded file whose contents are read from `source` when the case runs.
  sample& file_from(std::string path, std::string source) {
    files.push_back({std::move(path), {}, std::move(source)});
    return *this;
  }

  /// The sample's `list` entry.
  protocol::sample_info info() const { return {id, tags, metadata}; }
};

/// The text of input turns (a sample's input): strings as they are, the `text` of text parts,
/// and the text of messages' content, joined by '\n'; other parts are left out. What an agent or
/// a dialogue is prompted with.
std::string input_text(const json::array& input);

}  // namespace mira::study
