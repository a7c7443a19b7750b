// Datasets (see dataset.hpp): the loaders scan a file once, checking every record, and keep where
// each record starts; samples are made from the file again when asked for.
#include <mira/study/dataset.hpp>

#include "study/dataset_records.hpp"
#include "study/file_io.hpp"
#include "study/unique_fd.hpp"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/parser.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>

namespace mira::study {

namespace detail {

enum class dataset_format { jsonl, json, csv };

struct dataset_store {
  // Where a record's line is not the one after the previous record's (the first record, and
  // those after blank lines or after a CSV record with line breaks inside quotes).
  struct line_jump {
    std::uint64_t index = 0;
    std::uint64_t line = 0;
  };
  struct id_entry {
    std::uint64_t hash = 0;
    std::uint64_t index = 0;
  };

  std::filesystem::path file;
  std::filesystem::path folder;  // seeded files' sources are relative to it
  dataset_format format = dataset_format::jsonl;
  dataset_options options;
  bool ids_are_positions = false;
  unique_fd fd;                        // JSONL and CSV: read again for each sample
  std::uint64_t data_end = 0;          // the input's size when it was scanned
  std::vector<std::uint64_t> offsets;  // each record's first byte
  std::vector<line_jump> jumps;
  std::vector<std::string> header;  // CSV
  json::array elements;             // JSON: the records, held whole
  std::vector<id_entry> ids;        // by hash, when records have ids

  static std::uint64_t hash(std::string_view id) { return std::hash<std::string_view>{}(id); }

  std::size_t size() const {
    return format == dataset_format::json ? elements.size() : offsets.size();
  }
  std::uint64_t line_of(std::size_t index) const;
  std::string where(std::size_t index) const;
  tl::expected<json::object, std::string> record(std::size_t index) const;
  tl::expected<std::string, std::string> id_at(std::size_t index, const json::object& r) const;
  study::sample make(std::size_t index) const;
  std::optional<std::size_t> index_of(std::string_view id) const;
  std::optional<std::size_t> index_of_position(std::string_view id) const;

  static dataset wrap(std::shared_ptr<const dataset_store> s) { return dataset(std::move(s)); }
};

std::uint64_t dataset_store::line_of(std::size_t index) const {
  auto it = std::upper_bound(jumps.begin(), jumps.end(), index,
                             [](std::size_t i, const line_jump& j) { return i < j.index; });
  auto& j = *std::prev(it);  // jumps[0] is record 0
  return j.line + (index - j.index);
}

std::string dataset_store::where(std::size_t index) const {
  if (format == dataset_format::json)
    return file.string() + ": record " + std::to_string(index + 1);
  return file.string() + ":" + std::to_string(line_of(index));
}

tl::expected<json::object, std::string> dataset_store::record(std::size_t index) const {
  if (format == dataset_format::json) return elements[index].as_object();
  auto begin = offsets[index];
  auto end = index + 1 < offsets.size() ? offsets[index + 1] : data_end;
  // The record and its line break; what follows up to the next record is only blank lines.
  auto want = std::min<std::uint64_t>(end - begin, options.max_record + 2);
  std::string bytes(want, '\0');
  std::size_t got = 0;
  while (got < want) {
    auto n = ::pread(fd.get(), bytes.data() + got, want - got, static_cast<off_t>(begin + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return tl::make_unexpected(std::string("cannot read it: ") + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  record_scanner scan(
      format == dataset_format::csv ? record_scanner::syntax::csv : record_scanner::syntax::lines,
      options.max_record);
  scan.feed(bytes);
  auto r = scan.next();
  if (r && !*r) r = scan.finish();
  if (!r || !*r)
    return tl::make_unexpected(
        std::string("the record is no longer there (the file changed since it was loaded)"));
  if (format == dataset_format::csv) {
    auto cells = csv_cells((*r)->text);
    if (!cells) return tl::make_unexpected(std::move(cells.error()));
    return csv_record(header, *cells, options.fields);
  }
  boost::system::error_code ec;
  auto v = json::parse((*r)->text, ec);
  if (ec) return tl::make_unexpected("not JSON: " + ec.message());
  auto* o = v.if_object();
  if (!o) return tl::make_unexpected("expected a JSON object, got " + std::string(kind_name(v)));
  return std::move(*o);
}

tl::expected<std::string, std::string> dataset_store::id_at(std::size_t index,
                                                            const json::object& r) const {
  if (ids_are_positions)
    return std::to_string(format == dataset_format::json ? index + 1 : line_of(index));
  auto id = record_id(r, options.fields.id);
  if (!id) return tl::make_unexpected(std::move(id.error()));
  if (!*id) return tl::make_unexpected(options.fields.id + ": the record has no id");
  return std::move(**id);
}

study::sample dataset_store::make(std::size_t index) const {
  if (index >= size())
    throw std::out_of_range(file.string() + " has " + std::to_string(size()) + " records, not " +
                            std::to_string(index + 1));
  auto r = record(index);
  tl::expected<std::string, std::string> id;
  tl::expected<study::sample, std::string> s;
  if (r) id = id_at(index, *r);
  if (r && id) s = record_sample(*r, std::move(*id), options.fields, folder);
  if (r && id && s) return std::move(*s);
  throw std::runtime_error(where(index) + ": " + (!r ? r.error() : !id ? id.error() : s.error()));
}

std::optional<std::size_t> dataset_store::index_of_position(std::string_view id) const {
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), n);
  if (ec != std::errc() || end != id.data() + id.size() || id.empty() || n == 0 ||
      (id.size() > 1 && id[0] == '0'))
    return std::nullopt;
  if (format == dataset_format::json) {
    if (n > elements.size()) return std::nullopt;
    return static_cast<std::size_t>(n - 1);
  }
  // The last jump at or before line n; the record is n lines past it, if it ends before the next.
  auto it = std::upper_bound(jumps.begin(), jumps.end(), n,
                             [](std::uint64_t line, const line_jump& j) { return line < j.line; });
  if (it == jumps.begin()) return std::nullopt;
  auto& j = *std::prev(it);
  auto index = j.index + (n - j.line);
  auto limit = it == jumps.end() ? offsets.size() : it->index;
  if (index >= limit) return std::nullopt;
  return static_cast<std::size_t>(index);
}

std::optional<std::size_t> dataset_store::index_of(std::string_view id) const {
  if (ids_are_positions) return index_of_position(id);
  auto h = hash(id);
  auto range =
      std::equal_range(ids.begin(), ids.end(), id_entry{h, 0},
                       [](const id_entry& a, const id_entry& b) { return a.hash < b.hash; });
  // A hash shared by other ids: each candidate's record says which is this one.
  for (auto it = range.first; it != range.second; ++it) {
    auto r = record(it->index);
    if (!r) continue;
    auto other = id_at(it->index, *r);
    if (other && *other == id) return static_cast<std::size_t>(it->index);
  }
  return std::nullopt;
}

namespace {

tl::unexpected<error> invalid(std::string text) {
  return tl::make_unexpected(fail(errc::dataset_invalid, std::move(text)));
}

// Checks the records as a loader meets them and indexes them into the store.
class indexer {
 public:
  explicit indexer(dataset_store& s) : s_(s) {}

  // Record `count` on `line` at `offset` (lines and offsets unused for JSON).
  tl::expected<void, error> add(const json::object& r, std::uint64_t offset, std::uint64_t line) {
    auto index = count_++;
    auto& fields = s_.options.fields;
    if (s_.format != dataset_format::json) {
      s_.offsets.push_back(offset);
      if (index == 0 || line != last_line_ + 1) s_.jumps.push_back({index, line});
      last_line_ = line;
    }
    auto id = record_id(r, fields.id);
    if (!id) return invalid(s_.where(index) + ": " + id.error());
    if (index == 0) s_.ids_are_positions = !*id;
    std::string sample_id;
    if (s_.ids_are_positions) {
      if (*id)
        return invalid(s_.where(index) + ": " + fields.id +
                       ": the first record has no id, so ids are the records' positions; this "
                       "one has one");
      sample_id = std::to_string(s_.format == dataset_format::json ? index + 1 : line);
    } else {
      if (!*id)
        return invalid(s_.where(index) + ": " + fields.id +
                       ": no id (the first record has one, so every record needs one)");
      s_.ids.push_back({dataset_store::hash(**id), index});
      sample_id = std::move(**id);
    }
    auto checked = record_sample(r, std::move(sample_id), fields, s_.folder);
    if (!checked) return invalid(s_.where(index) + ": " + checked.error());
    return {};
  }

  // Sorts the ids and refuses one given twice.
  tl::expected<void, error> finish() {
    auto& ids = s_.ids;
    std::sort(ids.begin(), ids.end(), [](auto& a, auto& b) {
      return a.hash != b.hash ? a.hash < b.hash : a.index < b.index;
    });
    for (std::size_t i = 1; i < ids.size(); ++i) {
      if (ids[i].hash != ids[i - 1].hash) continue;
      // Rare: the same hash. Every earlier entry of the run may hold the same id.
      auto later = id_of(ids[i].index);
      for (auto k = i; k-- > 0 && ids[k].hash == ids[i].hash;)
        if (!later.empty() && id_of(ids[k].index) == later)
          return invalid(s_.where(ids[i].index) + ": " + s_.options.fields.id + ": '" + later +
                         "' is also the id of " + s_.where(ids[k].index));
    }
    return {};
  }

 private:
  // The id of a record read again (empty if it cannot be: the file changed meanwhile).
  std::string id_of(std::size_t index) const {
    auto r = s_.record(index);
    auto id = r ? s_.id_at(index, *r) : tl::expected<std::string, std::string>();
    return r && id ? *id : std::string();
  }

  dataset_store& s_;
  std::uint64_t count_ = 0;
  std::uint64_t last_line_ = 0;
};

json::parse_options parse_options() {
  json::parse_options o;
  o.max_depth = 256;  // inputs nest messages in parts in turns
  return o;
}

std::shared_ptr<dataset_store> new_store(const std::filesystem::path& file, dataset_options options,
                                         dataset_format format) {
  auto s = std::make_shared<dataset_store>();
  s->file = file;
  s->folder = file.parent_path();
  s->format = format;
  s->options = std::move(options);
  return s;
}

// A CSV header: the columns' names, each given once.
tl::expected<std::vector<std::string>, std::string> header_of(std::string_view text) {
  auto cells = csv_cells(text);
  if (!cells) return cells;
  std::set<std::string_view> seen;
  for (auto& name : *cells) {
    if (name.empty()) return tl::make_unexpected(std::string("a column has no name"));
    if (!seen.insert(name).second) return tl::make_unexpected("two columns are named " + name);
  }
  return cells;
}

// One JSONL or CSV record met by the scan: the header, or a record to check and index.
tl::expected<void, error> take(dataset_store& s, indexer& ix, json::parser& parser,
                               const record_scanner::record& r) {
  auto here = s.file.string() + ":" + std::to_string(r.line) + ": ";
  if (s.format == dataset_format::csv) {
    if (s.header.empty()) {
      auto h = header_of(r.text);
      if (!h) return invalid(here + "header: " + h.error());
      s.header = std::move(*h);
      return {};
    }
    auto cells = csv_cells(r.text);
    if (!cells) return invalid(here + cells.error());
    auto record = csv_record(s.header, *cells, s.options.fields);
    if (!record) return invalid(here + record.error());
    return ix.add(*record, r.offset, r.line);
  }
  // A fresh arena per record, on the stack for a typical one (docs/toolchain-notes.md).
  unsigned char first[4096];
  json::monotonic_resource arena(first, sizeof first);
  parser.reset(json::storage_ptr(&arena));
  boost::system::error_code ec;
  parser.write(r.text.data(), r.text.size(), ec);
  if (ec) return invalid(here + "not JSON (" + ec.message() + ")");
  auto v = parser.release();
  auto* o = v.if_object();
  if (!o) return invalid(here + "expected a JSON object, got " + std::string(kind_name(v)));
  return ix.add(*o, r.offset, r.line);
}

tl::expected<dataset, error> load_records(const std::filesystem::path& file,
                                          dataset_options options, dataset_format format) {
  auto s = new_store(file, std::move(options), format);
  s->fd.reset(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  auto unreadable = [&] {
    return tl::make_unexpected(
        fail(errc::file_unreadable, "cannot read " + file.string() + ": " + std::strerror(errno)));
  };
  if (!s->fd) return unreadable();
  record_scanner scan(
      format == dataset_format::csv ? record_scanner::syntax::csv : record_scanner::syntax::lines,
      s->options.max_record);
  indexer ix(*s);
  json::parser parser(json::storage_ptr(), parse_options());
  std::vector<char> chunk(std::size_t{1} << 20);
  for (bool end = false; !end;) {
    auto n = ::read(s->fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return unreadable();
    end = n == 0;
    scan.feed(std::string_view(chunk.data(), static_cast<std::size_t>(n)));
    s->data_end += static_cast<std::uint64_t>(n);
    for (;;) {
      auto r = end ? scan.finish() : scan.next();
      if (!r)
        return invalid(file.string() + ":" + std::to_string(r.error().line) + ": " +
                       r.error().what);
      if (!*r) break;
      if (auto ok = take(*s, ix, parser, **r); !ok) return tl::make_unexpected(ok.error());
    }
  }
  if (format == dataset_format::csv && s->header.empty())
    return invalid(file.string() + ": no header row");
  if (auto ok = ix.finish(); !ok) return tl::make_unexpected(ok.error());
  return dataset_store::wrap(std::move(s));
}

}  // namespace

}  // namespace detail

std::size_t dataset::size() const noexcept {
  return store_->size();
}

study::sample dataset::at(std::size_t index) const {
  return store_->make(index);
}

std::optional<std::size_t> dataset::index_of(std::string_view id) const {
  return store_->index_of(id);
}

bool dataset::ids_are_positions() const noexcept {
  return store_->ids_are_positions;
}

const std::filesystem::path& dataset::file() const noexcept {
  return store_->file;
}

tl::expected<dataset, error> jsonl(const std::filesystem::path& file, dataset_options options) {
  return detail::load_records(file, std::move(options), detail::dataset_format::jsonl);
}

tl::expected<dataset, error> csv(const std::filesystem::path& file, dataset_options options) {
  return detail::load_records(file, std::move(options), detail::dataset_format::csv);
}

tl::expected<dataset, error> json_array(const std::filesystem::path& file,
                                        dataset_options options) {
  auto text = detail::read_bounded(file, static_cast<std::size_t>(-1));
  if (!text) return tl::make_unexpected(std::move(text.error()));
  boost::system::error_code ec;
  auto v = json::parse(*text, ec, json::storage_ptr(), detail::parse_options());
  if (ec) return detail::invalid(file.string() + ": not JSON (" + ec.message() + ")");
  auto* a = v.if_array();
  if (!a)
    return detail::invalid(file.string() + ": expected an array of records, got " +
                           std::string(detail::kind_name(v)));
  auto s = detail::new_store(file, std::move(options), detail::dataset_format::json);
  s->elements = std::move(*a);
  detail::indexer ix(*s);
  for (std::size_t i = 0; i < s->elements.size(); ++i) {
    auto* o = s->elements[i].if_object();
    if (!o)
      return detail::invalid(s->where(i) + ": expected a JSON object, got " +
                             std::string(detail::kind_name(s->elements[i])));
    if (auto ok = ix.add(*o, 0, 0); !ok) return tl::make_unexpected(ok.error());
  }
  if (auto ok = ix.finish(); !ok) return tl::make_unexpected(ok.error());
  return detail::dataset_store::wrap(std::move(s));
}

sample_generator dataset::generator() const {
  auto s = store_;
  return {s->size(), [s](std::size_t i) { return s->make(i); },
          [s](std::string_view id) { return s->index_of(id); }};
}

}  // namespace mira::study
