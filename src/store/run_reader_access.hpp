// The store's own way into run_reader, private to the library: a folder already found (and its
// meta.json already read, or made up by rebuild_meta), and for a writer's load the folders of
// keys saved under a foreign name, with the temporaries of a killed save removed.
#pragma once

#include <mira/store/run_reader.hpp>

#include <filesystem>
#include <string>
#include <unordered_map>

namespace mira::store::detail {

struct run_reader_access {
  /// `dirs`: see run_folder::load_cases' `foreign_dirs`; given only by a writer.
  static run_reader open_folder(const std::filesystem::path& folder, run_meta meta,
                                std::unordered_map<std::string, std::filesystem::path>* dirs);
};

}  // namespace mira::store::detail
