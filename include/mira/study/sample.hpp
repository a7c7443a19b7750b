// A study's samples: what one case of an eval is about (its input and the expected answer) and
// what `list` says of it.
#pragma once

#include <mira/protocol/types.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mira::study {

namespace json = boost::json;

/// One sample of an eval. Only `id` is required; `input` and `expected` reach the subject (via
/// its run_context) and the scorers, and are copied into each run result so that a saved result
/// says what was asked; `tags` and `metadata` are listed for the host's selection and grouping.
struct sample {
  // Each member has an initializer, so that `{"id"}` and `{"id", input}` leave the rest out
  // without -Wmissing-field-initializers.
  std::string id{};
  /// The input turns: strings, or multimodal parts (protocol::part's JSON form).
  json::array input{};
  /// The reference answer, when the dataset has one (matches_expected compares with it).
  std::optional<json::value> expected{};
  std::vector<std::string> tags{};
  json::object metadata{};

  /// The sample's `list` entry.
  protocol::sample_info info() const { return {id, tags, metadata}; }
};

/// The text of input turns (a sample's input): strings as they are and the `text` of text parts,
/// joined by '\n'; other parts are left out. What an agent or a dialogue is prompted with.
std::string input_text(const json::array& input);

}  // namespace mira::study
