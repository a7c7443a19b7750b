// Datasets: samples read from a JSONL, JSON or CSV file, for an eval's sample list
// (`s.add("qa").dataset(*study::jsonl("qa.jsonl"))`). JSONL and CSV are read lazily: loading
// scans the file once, checks every record and keeps only where each record starts (8 bytes a
// record) and, when records have ids, a sorted table of id hashes (16 bytes a record); `list`
// pages and `run` read only the records they need. A JSON array is held whole.
//
// A record's fields (the names are a dataset_fields mapping):
//   id        a string or an integer. When the first record has none, every id is the record's
//             position: the line it starts on for JSONL and CSV (the header is line 1), its
//             position from 1 in a JSON array; then no record may have one.
//   input     a string (one user turn) or an array of turns, each a string, a part
//             ({"kind": "text" | "image" | "audio" | "file" | "json", ...}, checked as the
//             protocol defines it) or a message {"role": "...", "content": string or parts}.
//   expected  any JSON (null or absent: none).
//   tags      an array of strings.
//   metadata  an object.
//   files     seeded files: {"path/in/workdir": "contents", ...}, or an array of
//             {"path": ..., "contents": "..."} and {"path": ..., "source": "file"}, the source
//             relative to the dataset's folder (read when the case runs). Paths as
//             check_seed_path wants them; a source may not be absolute or climb with "..".
// Other fields are ignored. In CSV every cell is text: input and expected are the cell's text
// (an empty expected cell: none), tags are split at ',' and ';' (blanks trimmed), metadata and
// files cells hold JSON (empty: none), and every column no field names joins metadata as a
// string.
#pragma once

#include <mira/study/error.hpp>
#include <mira/study/registry.hpp>
#include <mira/study/sample.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace mira::study {

/// Which field of a record holds what (an empty name: the dataset has no such field; an empty
/// `id` makes ids the records' positions).
struct dataset_fields {
  std::string id = "id";
  std::string input = "input";
  std::string expected = "expected";
  std::string tags = "tags";
  std::string metadata = "metadata";
  std::string files = "files";
};

struct dataset_options {
  dataset_fields fields{};
  /// The longest record (a JSONL line, a CSV record) read; a longer one fails the load.
  std::size_t max_record = std::size_t{16} << 20;
};

namespace detail {
struct dataset_store;
}

/// A loaded dataset: its samples, made one at a time. Copies share the loaded index (and the
/// open file), so handing one to an eval is cheap. Each sample is made again when asked for; a
/// record that can no longer be read as it was at load (the file changed) fails that sample
/// with a message naming file:line.
class dataset {
 public:
  std::size_t size() const noexcept;
  /// The sample at `index` < size(). Throws std::runtime_error naming the file and line when the
  /// record cannot be read now, std::out_of_range for an index past the end.
  study::sample at(std::size_t index) const;
  /// The index of the sample with this id, or nullopt.
  std::optional<std::size_t> index_of(std::string_view id) const;
  /// Whether ids are the records' positions (the first record had no id field).
  bool ids_are_positions() const noexcept;
  const std::filesystem::path& file() const noexcept;
  /// The samples as an eval takes them (eval::dataset does this).
  sample_generator generator() const;

 private:
  friend struct detail::dataset_store;
  explicit dataset(std::shared_ptr<const detail::dataset_store> store) : store_(std::move(store)) {}
  std::shared_ptr<const detail::dataset_store> store_;
};

/// A JSON Lines file: one record (a JSON object) per line; blank lines are skipped. Errors:
/// file_unreadable, and dataset_invalid for the first record that is not valid ("qa.jsonl:17:
/// tags: expected an array of strings, got number"), a duplicated id, or a line longer than
/// max_record.
tl::expected<dataset, error> jsonl(const std::filesystem::path& file, dataset_options options = {});
/// A JSON file holding an array of records; read and held whole (use JSONL for a large one).
tl::expected<dataset, error> json_array(const std::filesystem::path& file,
                                        dataset_options options = {});
/// A CSV file (RFC 4180: comma-separated, fields with commas, quotes or line breaks quoted with
/// '"', a quote inside doubled; LF or CRLF line ends) whose first row names the columns. Errors
/// as jsonl(), and dataset_invalid for a row with another number of cells than the header, a
/// quote inside an unquoted cell, or a quote left open at the end of the file.
tl::expected<dataset, error> csv(const std::filesystem::path& file, dataset_options options = {});

}  // namespace mira::study
