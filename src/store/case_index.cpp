// case-index.bin (case_index.hpp): a JSON header line, then the entries (32 bytes each, this
// machine's byte order: an index read on another machine fails its checks and is made again),
// the keys, the states, the records' CRC-32Cs, and a CRC-32C of everything before it.
#include "store/case_index.hpp"

#include <mira/store/files.hpp>
#include "protocol/json_scan.hpp"
#include "store/file_helpers.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace mira::store::detail {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::int64_t format_version = 1;

json::array strings(const std::vector<std::string>& v) {
  json::array a;
  for (auto& s : v) a.emplace_back(s);
  return a;
}

bool take_strings(const json::value* v, std::vector<std::string>& out) {
  if (!v || !v->is_array()) return false;
  for (auto& s : v->get_array()) {
    if (!s.is_string()) return false;
    out.emplace_back(s.get_string());
  }
  return true;
}

// The header's fields other than the stamps and sizes: what the scan found damaged.
bool take_damage(const json::object& h, compact_scan& c) {
  if (!take_strings(h.if_contains("unreadable"), c.unreadable) ||
      !take_strings(h.if_contains("superseded"), c.superseded))
    return false;
  auto* damaged = h.if_contains("damaged");
  if (!damaged || !damaged->is_array()) return false;
  for (auto& d : damaged->get_array()) {
    auto* a = d.if_array();
    auto count = [&](std::size_t i) { return (*a)[i].is_uint64() || (*a)[i].is_int64(); };
    if (!a || a->size() != 4 || !(*a)[0].is_string() || !(*a)[1].is_string() || !count(2) ||
        !count(3))
      return false;
    c.damaged.push_back({std::string((*a)[0].get_string()), std::string((*a)[1].get_string()),
                         (*a)[2].to_number<std::size_t>(), (*a)[3].to_number<std::size_t>()});
  }
  return true;
}

// Every entry inside the keys and inside its segment as stamped, every state one there is.
bool consistent(const compact_scan& c) {
  for (auto& e : c.entries)
    if (e.source >= c.stamps.size() || e.key_at + e.key_size > c.keys.size() ||
        e.at + e.size > c.stamps[e.source].size)
      return false;
  constexpr auto last = 1 + static_cast<int>(schedule::case_state::executed);
  return std::all_of(c.states.begin(), c.states.end(), [](std::uint8_t s) { return s <= last; });
}

}  // namespace

std::optional<std::vector<segment_stamp>> stamp_segments(const std::vector<fs::path>& segments) {
  std::vector<segment_stamp> out;
  for (auto& p : segments) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    out.push_back({p.filename().string(), static_cast<std::uint64_t>(st.st_size),
                   std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
                   static_cast<std::uint64_t>(st.st_ino)});
  }
  return out;
}

std::optional<std::string> read_bounded(const fs::path& path, std::size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) <= max) {
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t done = 0;
    while (done < text.size()) {
      auto n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    if (done == text.size()) out = std::move(text);
  }
  ::close(fd);
  return out;
}

json::array stamps_json(const std::vector<segment_stamp>& stamps) {
  json::array segs;
  for (auto& s : stamps) segs.push_back(json::array{s.name, s.size, s.mtime_ns, s.inode});
  return segs;
}

std::optional<std::vector<segment_stamp>> take_stamps(const json::value* segs) {
  if (!segs || !segs->is_array()) return std::nullopt;
  std::vector<segment_stamp> out;
  for (auto& s : segs->get_array()) {
    auto* a = s.if_array();
    if (!a || a->size() != 4 || !(*a)[0].is_string() || !(*a)[1].is_number() ||
        !(*a)[2].is_number() || !(*a)[3].is_number())
      return std::nullopt;
    out.push_back({std::string((*a)[0].get_string()), (*a)[1].to_number<std::uint64_t>(),
                   (*a)[2].to_number<std::int64_t>(), (*a)[3].to_number<std::uint64_t>()});
  }
  return out;
}

std::optional<compact_scan> load_case_index(const fs::path& folder,
                                            const std::vector<segment_stamp>& stamps) {
  auto text = read_bounded(folder / case_index_name, max_index_bytes);
  if (!text || text->size() < 4) return std::nullopt;
  const std::size_t body = text->size() - 4;
  std::uint32_t crc = 0;
  std::memcpy(&crc, text->data() + body, 4);
  if (crc32c(std::string_view(*text).substr(0, body)) != crc) return std::nullopt;
  auto nl = text->find('\n');
  if (nl == std::string::npos || nl > body) return std::nullopt;
  boost::system::error_code ec;
  auto header = json::parse(std::string_view(*text).substr(0, nl), ec);
  auto* h = header.if_object();
  if (ec || !h) return std::nullopt;
  auto number = [&](std::string_view name) -> std::optional<std::size_t> {
    auto* v = h->if_contains(name);
    if (!v || !(v->is_uint64() || v->is_int64())) return std::nullopt;
    return v->to_number<std::size_t>();
  };
  auto version = number("mira_case_index");
  auto count = number("entries");
  auto keys = number("keys_bytes");
  if (!version || *version != format_version || !count || !keys) return std::nullopt;
  compact_scan c;
  auto taken = take_stamps(h->if_contains("segments"));
  if (!taken || *taken != stamps || !take_damage(*h, c)) return std::nullopt;
  c.stamps = std::move(*taken);
  const std::size_t at = nl + 1;
  if (body - at != *count * (sizeof(reader_entry) + 1 + sizeof(std::uint32_t)) + *keys)
    return std::nullopt;
  const char* p = text->data() + at;
  c.entries.resize(*count);
  std::memcpy(c.entries.data(), p, *count * sizeof(reader_entry));
  p += *count * sizeof(reader_entry);
  c.keys.assign(p, *keys);
  p += *keys;
  c.states.assign(p, p + *count);
  p += *count;
  c.crcs.resize(*count);
  std::memcpy(c.crcs.data(), p, *count * sizeof(std::uint32_t));
  if (!consistent(c)) return std::nullopt;
  return c;
}

bool save_case_index(const fs::path& folder, const compact_scan_view& scan) {
  json::array damaged;
  for (auto& d : scan.damaged)
    damaged.push_back(json::array{d.problem, d.key, d.records_before, d.newest});
  json::object header{
      {"mira_case_index", format_version},      {"entries", scan.entries.size()},
      {"keys_bytes", scan.keys.size()},         {"segments", stamps_json(scan.stamps)},
      {"unreadable", strings(scan.unreadable)}, {"superseded", strings(scan.superseded)},
      {"damaged", std::move(damaged)}};
  auto file = atomic_file::create(folder / case_index_name);
  if (!file) return false;
  // Written piece by piece from the reader's own vectors: a million cases are some 50 MB.
  std::uint32_t crc = 0;
  auto write = [&](std::string_view bytes) {
    crc = crc32c(bytes, crc);
    file->write(bytes);
  };
  auto bytes = [](auto span) {
    return std::string_view(reinterpret_cast<const char*>(span.data()), span.size_bytes());
  };
  write(json::serialize(header) + "\n");
  write(bytes(scan.entries));
  write(scan.keys);
  write(bytes(scan.states));
  write(bytes(scan.crcs));
  file->write(std::string_view(reinterpret_cast<const char*>(&crc), 4));
  return !file->commit();
}

std::optional<schedule::case_state> record_state(std::string_view r) {
  using mira::detail::scan_json_value;
  using mira::detail::skip_json_ws;
  std::size_t at = skip_json_ws(r, 0);
  if (at >= r.size() || r[at] != '{') return std::nullopt;
  at = skip_json_ws(r, at + 1);
  while (at < r.size() && r[at] == '"') {
    auto name = read_json_string(r, at);
    if (!name) return std::nullopt;
    at = skip_json_ws(r, name->second);
    if (at >= r.size() || r[at] != ':') return std::nullopt;
    at = skip_json_ws(r, at + 1);
    auto end = scan_json_value(r, at, 1);
    if (end == mira::detail::json_scan_failed) return std::nullopt;
    if (name->first == "status") {
      auto value = read_json_string(r, at);
      return value ? schedule::case_state_from_string(value->first) : std::nullopt;
    }
    at = skip_json_ws(r, end);
    if (at < r.size() && r[at] == ',') at = skip_json_ws(r, at + 1);
  }
  return std::nullopt;
}

}  // namespace mira::store::detail
