// The sans-I/O core of the dataset loaders: a scanner that splits JSONL or CSV bytes into
// records with their offsets and line numbers, the cells of a CSV row, and a record (a JSON
// object) checked and made into a sample. Tests feed them bytes directly. Not line_framer:
// a dataset needs each record's offset and line, CSV's quoted line breaks, and an error (not a
// skip) for an overlong record.
#pragma once

#include <mira/study/dataset.hpp>
#include <mira/study/sample.hpp>

#include <tl/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mira::study::detail {

/// Bytes in, records out. A record ends at a line break: any for JSON Lines, one outside
/// quotes for CSV. Blank records (only blanks for JSONL, nothing for CSV) are skipped; a
/// trailing CR is dropped.
class record_scanner {
 public:
  enum class syntax { lines, csv };
  struct record {
    std::uint64_t offset = 0;  // of its first byte in the whole input
    std::uint64_t line = 0;    // the 1-based line it starts on
    std::string_view text;     // without its line break; valid until the next feed()
  };
  struct failure {
    std::uint64_t line = 0;
    std::string what;
  };
  using result = tl::expected<std::optional<record>, failure>;

  record_scanner(syntax s, std::size_t max_record) : syntax_(s), max_record_(max_record) {}

  /// Appends input.
  void feed(std::string_view bytes);
  /// The next whole record; nullopt when more input is needed. A record longer than max_record
  /// is a failure, found as soon as that many bytes have come without its end.
  result next();
  /// At the end of the input: the last record when it has no line break, then nullopt; a
  /// failure for a CSV quote still open.
  result finish();

 private:
  result take(std::size_t end);
  /// Scans on for the current CSV record's end: its line break, or npos.
  std::size_t csv_end();

  syntax syntax_;
  std::size_t max_record_;
  std::string buf_;
  std::uint64_t base_ = 0;   // the input offset of buf_[0]
  std::size_t begin_ = 0;    // the current record's first byte in buf_
  std::size_t scan_ = 0;     // where the search for its end resumes
  std::uint64_t line_ = 1;   // the line the current record starts on
  std::uint64_t inner_ = 0;  // line breaks inside quotes since begin_
  // CSV: where scan_ is in the current record's cells (a quote closing a quoted cell, or the
  // first of two escaping one, is `closed` until the next byte says which).
  enum class csv_state { cell_start, unquoted, quoted, closed };
  csv_state csv_ = csv_state::cell_start;
  bool finished_ = false;
};

/// The cells of one CSV record (RFC 4180). Errors name the cell (from 1): a quote inside an
/// unquoted cell, text after a closing quote, a quote left open.
tl::expected<std::vector<std::string>, std::string> csv_cells(std::string_view record);

/// "number", "string", ...: what a JSON value is, for messages.
std::string_view kind_name(const json::value& v);

/// A record's id field: nullopt when the record has none (or `field` is empty). A string (not
/// empty) or an integer, which becomes its decimal text.
tl::expected<std::optional<std::string>, std::string> record_id(const json::object& record,
                                                                const std::string& field);

/// The sample a record describes, its id given. Every value is copied out of `record`, which may
/// live in a parser's arena. Sources of seeded files are joined to `folder`. The error says
/// which field and what is wrong with it ("tags[2]: expected a string, got number").
tl::expected<study::sample, std::string> record_sample(const json::object& record, std::string id,
                                                       const dataset_fields& fields,
                                                       const std::filesystem::path& folder);

/// A CSV row as the record the JSON formats have (see dataset.hpp); `header` names the cells.
tl::expected<json::object, std::string> csv_record(const std::vector<std::string>& header,
                                                   const std::vector<std::string>& cells,
                                                   const dataset_fields& fields);

}  // namespace mira::study::detail
