// The dataset loaders' sans-I/O core (see dataset_records.hpp).
#include "study/dataset_records.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/study/seed_files.hpp>

#include <boost/json/parse.hpp>

#include <cstring>
#include <utility>

namespace mira::study::detail {

void record_scanner::feed(std::string_view bytes) {
  // Only the current record's bytes are kept: what came before was handed out already.
  if (begin_ > 0) {
    buf_.erase(0, begin_);
    base_ += begin_;
    scan_ -= begin_;
    begin_ = 0;
  }
  buf_.append(bytes);
}

record_scanner::result record_scanner::next() {
  for (;;) {
    std::size_t end = std::string::npos;
    if (syntax_ == syntax::lines) {
      auto* p =
          static_cast<const char*>(std::memchr(buf_.data() + scan_, '\n', buf_.size() - scan_));
      if (p) end = static_cast<std::size_t>(p - buf_.data());
      scan_ = p ? end : buf_.size();
    } else {
      end = csv_end();
    }
    if (end == std::string::npos) {
      if (buf_.size() - begin_ > max_record_)
        return tl::make_unexpected(failure{line_, "the record is longer than the " +
                                                      std::to_string(max_record_) +
                                                      " bytes read (dataset_options::max_record)"});
      return std::nullopt;
    }
    auto r = take(end);
    if (!r || *r) return r;
  }
}

std::size_t record_scanner::csv_end() {
  for (; scan_ < buf_.size(); ++scan_) {
    char c = buf_[scan_];
    if (csv_ == csv_state::quoted) {
      if (c == '"') csv_ = csv_state::closed;
      inner_ += c == '\n';
    } else if (c == '"' && csv_ != csv_state::unquoted) {
      // A quote opens a quoted cell at its start and escapes one right after a closing one;
      // anywhere else it is the cell parser's to report.
      csv_ = csv_state::quoted;
    } else if (c == '\n') {
      return scan_;
    } else {
      csv_ = c == ',' ? csv_state::cell_start : csv_state::unquoted;
    }
  }
  return std::string::npos;
}

record_scanner::result record_scanner::finish() {
  if (finished_) return std::nullopt;
  finished_ = true;
  auto r = next();
  if (!r || *r) {
    finished_ = false;  // more whole records first; the tail on a later call
    return r;
  }
  if (csv_ == csv_state::quoted)
    return tl::make_unexpected(
        failure{line_, "a quote opened in this record is not closed at the end of the file"});
  if (begin_ == buf_.size()) return std::nullopt;
  return take(buf_.size());
}

// The record [begin_, end) with the line break at `end` (or the input's end); nullopt for a
// blank one.
record_scanner::result record_scanner::take(std::size_t end) {
  record r;
  r.offset = base_ + begin_;
  r.line = line_;
  r.text = std::string_view(buf_).substr(begin_, end - begin_);
  if (!r.text.empty() && r.text.back() == '\r') r.text.remove_suffix(1);
  line_ += 1 + inner_;
  inner_ = 0;
  csv_ = csv_state::cell_start;
  begin_ = scan_ = end < buf_.size() ? end + 1 : end;
  if (r.text.size() > max_record_)
    return tl::make_unexpected(failure{r.line, "the record is longer than the " +
                                                   std::to_string(max_record_) +
                                                   " bytes read (dataset_options::max_record)"});
  bool blank = syntax_ == syntax::csv ? r.text.empty()
                                      : r.text.find_first_not_of(" \t\r") == std::string_view::npos;
  if (blank) return std::nullopt;
  return r;
}

tl::expected<std::vector<std::string>, std::string> csv_cells(std::string_view record) {
  std::vector<std::string> cells;
  std::size_t i = 0;
  for (;;) {
    auto n = std::to_string(cells.size() + 1);
    auto& cell = cells.emplace_back();
    if (i < record.size() && record[i] == '"') {
      for (++i;; ++i) {
        if (i == record.size())
          return tl::make_unexpected("cell " + n + ": its quote is not closed");
        if (record[i] != '"') {
          cell += record[i];
        } else if (i + 1 < record.size() && record[i + 1] == '"') {
          cell += '"';
          ++i;
        } else {
          ++i;
          break;
        }
      }
      if (i < record.size() && record[i] != ',')
        return tl::make_unexpected("cell " + n + ": text after its closing quote");
    } else {
      auto end = record.find(',', i);
      if (end == std::string_view::npos) end = record.size();
      cell.assign(record.substr(i, end - i));
      if (cell.find('"') != std::string::npos)
        return tl::make_unexpected("cell " + n +
                                   ": a quote inside an unquoted cell (quote the cell and double "
                                   "the quotes inside)");
      i = end;
    }
    if (i == record.size()) return cells;
    ++i;  // the comma
  }
}

std::string_view kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

namespace {

using failed = tl::unexpected<std::string>;

failed wrong(const std::string& path, std::string_view expected, const json::value& got) {
  return failed(path + ": expected " + std::string(expected) + ", got " +
                std::string(kind_name(got)));
}

// A copy with the default memory resource: `v` may live in a parser's arena, and a plain copy
// would share it (docs/toolchain-notes.md).
json::value own(const json::value& v) {
  return json::value(v, json::storage_ptr());
}

// A part as the protocol checks it (kind, source), its error path under `path`.
tl::expected<void, std::string> check_part(const json::value& v, const std::string& path) {
  auto p = protocol::decode_part(v);
  if (!p) {
    auto& e = p.error();
    return failed(path + (e.path.empty() ? "" : "." + e.path) + ": " + e.what);
  }
  return {};
}

tl::expected<void, std::string> check_turn(const json::value& v, const std::string& path) {
  if (v.is_string()) return {};
  auto* o = v.if_object();
  if (!o) return wrong(path, "a string, a part or a message", v);
  if (o->contains("kind")) return check_part(v, path);
  auto* role = o->if_contains("role");
  if (!role) return failed(path + ": a turn object is a part (with kind) or a message (with role)");
  if (!role->is_string()) return wrong(path + ".role", "a string", *role);
  auto* content = o->if_contains("content");
  if (!content) return failed(path + ": a message needs its content");
  if (content->is_string()) return {};
  auto* parts = content->if_array();
  if (!parts) return wrong(path + ".content", "a string or an array of parts", *content);
  for (std::size_t i = 0; i < parts->size(); ++i) {
    auto where = path + ".content[" + std::to_string(i) + "]";
    auto& part = (*parts)[i];
    if (part.is_string()) continue;
    if (auto ok = check_part(part, where); !ok) return ok;
  }
  return {};
}

tl::expected<json::array, std::string> input_of(const json::value& v, const std::string& field) {
  if (v.is_string()) return json::array{own(v)};
  auto* turns = v.if_array();
  if (!turns) return wrong(field, "a string or an array of turns", v);
  json::array out;
  out.reserve(turns->size());
  for (std::size_t i = 0; i < turns->size(); ++i) {
    if (auto ok = check_turn((*turns)[i], field + "[" + std::to_string(i) + "]"); !ok)
      return failed(std::move(ok.error()));
    out.push_back(own((*turns)[i]));
  }
  return out;
}

tl::expected<std::vector<std::string>, std::string> tags_of(const json::value& v,
                                                            const std::string& field) {
  auto* a = v.if_array();
  if (!a) return wrong(field, "an array of strings", v);
  std::vector<std::string> tags;
  tags.reserve(a->size());
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto* s = (*a)[i].if_string();
    if (!s) return wrong(field + "[" + std::to_string(i) + "]", "a string", (*a)[i]);
    tags.emplace_back(*s);
  }
  return tags;
}

// A seeded file's path (or source), checked.
tl::expected<std::string, std::string> seed_path(std::string_view path, const std::string& where) {
  if (auto problem = check_seed_path(path); !problem.empty())
    return failed(where + ": '" + std::string(path) + "': " + problem);
  return std::string(path);
}

tl::expected<std::string, std::string> seed_path(const json::value& v, const std::string& where) {
  auto* s = v.if_string();
  if (!s) return wrong(where, "a string", v);
  return seed_path(std::string_view(*s), where);
}

tl::expected<seed_file, std::string> file_entry(const json::value& v, const std::string& where,
                                                const std::filesystem::path& folder) {
  auto* o = v.if_object();
  if (!o) return wrong(where, "an object {path, contents} or {path, source}", v);
  auto* p = o->if_contains("path");
  if (!p) return failed(where + ": no path");
  auto path = seed_path(*p, where + ".path");
  if (!path) return failed(std::move(path.error()));
  auto* contents = o->if_contains("contents");
  auto* source = o->if_contains("source");
  if ((contents != nullptr) == (source != nullptr))
    return failed(where + ": give exactly one of contents and source");
  if (contents) {
    auto* text = contents->if_string();
    if (!text) return wrong(where + ".contents", "a string", *contents);
    return seed_file{std::move(*path), std::string(*text), std::nullopt};
  }
  auto from = seed_path(*source, where + ".source");
  if (!from) return failed(std::move(from.error()));
  return seed_file{std::move(*path), {}, (folder / *from).string()};
}

tl::expected<std::vector<seed_file>, std::string> files_of(const json::value& v,
                                                           const std::string& field,
                                                           const std::filesystem::path& folder) {
  std::vector<seed_file> files;
  if (auto* o = v.if_object()) {
    for (auto& [key, value] : *o) {
      auto where = field + "." + std::string(key);
      auto path = seed_path(std::string_view(key), field);
      if (!path) return failed(std::move(path.error()));
      auto* text = value.if_string();
      if (!text) return wrong(where, "a string (the file's contents)", value);
      files.push_back({std::move(*path), std::string(*text), std::nullopt});
    }
    return files;
  }
  auto* a = v.if_array();
  if (!a) return wrong(field, "an object {path: contents} or an array of files", v);
  for (std::size_t i = 0; i < a->size(); ++i) {
    auto f = file_entry((*a)[i], field + "[" + std::to_string(i) + "]", folder);
    if (!f) return failed(std::move(f.error()));
    files.push_back(std::move(*f));
  }
  return files;
}

// The record's member named `field`, or nullptr when the field is unnamed, absent or null.
const json::value* member(const json::object& record, const std::string& field) {
  if (field.empty()) return nullptr;
  auto* v = record.if_contains(field);
  return v && !v->is_null() ? v : nullptr;
}

}  // namespace

tl::expected<std::optional<std::string>, std::string> record_id(const json::object& record,
                                                                const std::string& field) {
  auto* v = member(record, field);
  if (!v) return std::nullopt;
  if (auto* s = v->if_string()) {
    if (s->empty()) return failed(field + ": the id is empty");
    return std::string(*s);
  }
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  return wrong(field, "a string or an integer", *v);
}

tl::expected<study::sample, std::string> record_sample(const json::object& record, std::string id,
                                                       const dataset_fields& fields,
                                                       const std::filesystem::path& folder) {
  study::sample s;
  s.id = std::move(id);
  if (auto* v = member(record, fields.input)) {
    auto input = input_of(*v, fields.input);
    if (!input) return failed(std::move(input.error()));
    s.input = std::move(*input);
  }
  if (auto* v = member(record, fields.expected)) s.expected = own(*v);
  if (auto* v = member(record, fields.tags)) {
    auto tags = tags_of(*v, fields.tags);
    if (!tags) return failed(std::move(tags.error()));
    s.tags = std::move(*tags);
  }
  if (auto* v = member(record, fields.metadata)) {
    auto* o = v->if_object();
    if (!o) return wrong(fields.metadata, "an object", *v);
    s.metadata = json::object(*o, json::storage_ptr());
  }
  if (auto* v = member(record, fields.files)) {
    auto files = files_of(*v, fields.files, folder);
    if (!files) return failed(std::move(files.error()));
    s.files = std::move(*files);
  }
  return s;
}

namespace {

// A CSV cell of tags: split at ',' and ';', blanks trimmed, empty ones dropped.
json::array split_tags(std::string_view cell) {
  json::array tags;
  std::size_t start = 0;
  while (start <= cell.size()) {
    auto end = cell.find_first_of(",;", start);
    if (end == std::string_view::npos) end = cell.size();
    auto tag = cell.substr(start, end - start);
    auto first = tag.find_first_not_of(" \t");
    if (first != std::string_view::npos) {
      tag = tag.substr(first, tag.find_last_not_of(" \t") - first + 1);
      tags.emplace_back(tag);
    }
    start = end + 1;
  }
  return tags;
}

}  // namespace

tl::expected<json::object, std::string> csv_record(const std::vector<std::string>& header,
                                                   const std::vector<std::string>& cells,
                                                   const dataset_fields& fields) {
  if (cells.size() != header.size())
    return failed("the row has " + std::to_string(cells.size()) + " cells, the header " +
                  std::to_string(header.size()));
  json::object record;
  json::object metadata;
  for (std::size_t i = 0; i < header.size(); ++i) {
    auto& name = header[i];
    auto& cell = cells[i];
    if (name == fields.tags) {
      record[name] = split_tags(cell);
    } else if (name == fields.metadata || name == fields.files) {
      if (cell.empty()) continue;
      boost::system::error_code ec;
      auto v = json::parse(cell, ec);
      if (ec) return failed(name + ": the cell is not JSON (" + ec.message() + ")");
      if (name == fields.files) {
        record[name] = std::move(v);
      } else if (auto* o = v.if_object()) {
        for (auto& [k, value] : *o) metadata[k] = value;
      } else {
        return wrong(name, "an object", v);
      }
    } else if (name == fields.id || name == fields.input || name == fields.expected) {
      if (!cell.empty()) record[name] = cell;
    } else {
      metadata[name] = cell;
    }
  }
  if (!metadata.empty() && !fields.metadata.empty()) record[fields.metadata] = std::move(metadata);
  return record;
}

}  // namespace mira::study::detail
