// case-index.journal (case_journal.hpp): "MIRA-CJ1", then a record after another (source u32,
// at u64, size u32, crc u32, state u8, key size u32, the key; this machine's byte order, as in
// case-index.bin), and once closed a trailer: its JSON ({"mira_case_journal":1,"entries":N,
// "segments":[stamps]}), the JSON's size (u32), a CRC-32C of every byte before it (u32), and
// "MIRA-CJ1" again.
#include "store/case_journal.hpp"

#include "store/file_helpers.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace mira::store::detail {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr std::string_view magic = "MIRA-CJ1";
constexpr std::size_t record_head = 4 + 8 + 4 + 4 + 1 + 4;
constexpr std::size_t tail_size = 4 + 4 + magic.size();  // after the trailer's JSON

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T take(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

struct parsed_journal {
  journal_contents contents;
  std::size_t records_end = 0;  // where the trailer starts
};

std::optional<parsed_journal> parse_journal(std::string_view text,
                                            const std::vector<segment_stamp>& stamps) {
  if (text.size() < magic.size() + tail_size || text.substr(0, magic.size()) != magic ||
      text.substr(text.size() - magic.size()) != magic)
    return std::nullopt;
  const char* tail = text.data() + text.size() - tail_size;
  const auto json_size = take<std::uint32_t>(tail);
  const auto crc = take<std::uint32_t>(tail);
  const std::size_t before_crc = text.size() - magic.size() - 4;
  if (crc32c(text.substr(0, before_crc)) != crc ||
      json_size > text.size() - magic.size() - tail_size)
    return std::nullopt;
  parsed_journal out;
  out.records_end = text.size() - tail_size - json_size;
  boost::system::error_code ec;
  auto trailer = json::parse(text.substr(out.records_end, json_size), ec);
  auto* t = trailer.if_object();
  if (ec || !t) return std::nullopt;
  auto* version = t->if_contains("mira_case_journal");
  auto* count = t->if_contains("entries");
  auto taken = take_stamps(t->if_contains("segments"));
  if (!version || !version->is_int64() || version->get_int64() != 1 || !count ||
      !count->is_int64() || count->get_int64() < 0 || !taken || *taken != stamps)
    return std::nullopt;
  auto& c = out.contents;
  const char* p = text.data() + magic.size();
  const char* end = text.data() + out.records_end;
  const auto n = static_cast<std::uint64_t>(count->get_int64());
  if (n > static_cast<std::uint64_t>(end - p) / record_head) return std::nullopt;
  c.keys.reserve(static_cast<std::size_t>(end - p) - n * record_head);
  c.entries.reserve(n);
  c.states.reserve(n);
  c.crcs.reserve(n);
  while (p != end) {
    if (static_cast<std::size_t>(end - p) < record_head) return std::nullopt;
    reader_entry e;
    e.source = take<std::uint32_t>(p);
    e.at = take<std::uint64_t>(p);
    e.size = take<std::uint32_t>(p);
    const auto record_crc = take<std::uint32_t>(p);
    const auto state = take<std::uint8_t>(p);
    e.key_size = take<std::uint32_t>(p);
    constexpr auto last = 1 + static_cast<int>(schedule::case_state::executed);
    if (e.key_size > static_cast<std::size_t>(end - p) || e.source >= stamps.size() ||
        e.at > stamps[e.source].size || e.size > stamps[e.source].size - e.at || state > last)
      return std::nullopt;
    e.key_at = c.keys.size();
    e.seq = static_cast<std::uint32_t>(c.entries.size());
    c.keys.append(p, e.key_size);
    p += e.key_size;
    c.entries.push_back(e);
    c.states.push_back(state);
    c.crcs.push_back(record_crc);
  }
  if (c.entries.size() != n) return std::nullopt;
  return out;
}

}  // namespace

std::unique_ptr<case_journal> case_journal::open(const fs::path& path,
                                                 const std::vector<fs::path>& segments) {
  if (segments.empty()) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return nullptr;
    std::unique_ptr<case_journal> j(new case_journal(path, fd, 0, 0, 0));
    j->pending_ = magic;
    j->commit();
    return j->fd_ >= 0 ? std::move(j) : nullptr;
  }
  auto stamps = stamp_segments(segments);
  auto text = read_bounded(path, max_index_bytes);
  auto parsed = stamps && text ? parse_journal(*text, *stamps) : std::nullopt;
  if (parsed) {
    // Continued: its trailer goes, and the records this writer adds follow the others.
    int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(parsed->records_end)) == 0) {
      const auto records = std::string_view(*text).substr(0, parsed->records_end);
      return std::unique_ptr<case_journal>(new case_journal(
          path, fd, records.size(), crc32c(records), parsed->contents.entries.size()));
    }
    if (fd >= 0) ::close(fd);
  }
  // Segments it does not vouch for (written by a version without journals, or by a writer that
  // stopped without closing it): this writer cannot vouch for them either.
  ::unlink(path.c_str());
  return nullptr;
}

case_journal::case_journal(fs::path path, int fd, std::uint64_t size, std::uint32_t crc,
                           std::uint64_t count)
    : path_(std::move(path)), fd_(fd), size_(size), crc_(crc), count_(count) {}

case_journal::~case_journal() {
  if (fd_ >= 0) fail();  // never closed: a journal without its trailer counts for nothing
}

void case_journal::fail() {
  ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
  pending_.clear();
}

void case_journal::add(const journal_record& r) {
  if (fd_ < 0) return;
  put(pending_, r.source);
  put(pending_, r.at);
  put(pending_, r.size);
  put(pending_, r.crc);
  put(pending_, r.state);
  put(pending_, static_cast<std::uint32_t>(r.key.size()));
  pending_ += r.key;
  ++count_;
}

bool case_journal::commit() {
  if (fd_ < 0) return false;
  std::size_t done = 0;
  while (done < pending_.size()) {
    auto n = ::pwrite(fd_, pending_.data() + done, pending_.size() - done,
                      static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fail();
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  crc_ = crc32c(pending_, crc_);
  size_ += pending_.size();
  pending_.clear();
  return true;
}

void case_journal::close(const std::vector<fs::path>& segments) {
  if (fd_ < 0) return;
  auto stamps = stamp_segments(segments);
  if (!stamps) return fail();
  pending_ = json::serialize(json::object{
      {"mira_case_journal", 1}, {"entries", count_}, {"segments", stamps_json(*stamps)}});
  put(pending_, static_cast<std::uint32_t>(pending_.size()));
  put(pending_, crc32c(pending_, crc_));
  pending_ += magic;
  commit();
  if (fd_ >= 0 && ::close(fd_) != 0) ::unlink(path_.c_str());
  fd_ = -1;
}

std::optional<journal_contents> load_case_journal(const fs::path& path,
                                                  const std::vector<segment_stamp>& stamps) {
  auto text = read_bounded(path, max_index_bytes);
  if (!text) return std::nullopt;
  auto parsed = parse_journal(*text, stamps);
  if (!parsed) return std::nullopt;
  return std::move(parsed->contents);
}

}  // namespace mira::store::detail
