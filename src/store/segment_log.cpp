// The compact run layout's segment files: line format, writer thread, reader (see
// segment_log.hpp and docs/store.md).
#include "store/segment_log.hpp"
#include <mira/protocol/codec.hpp>
#include <mira/store/files.hpp>
#include "protocol/json_scan.hpp"
#include "store/batch_thread.hpp"
#include "store/case_journal.hpp"
#include "store/file_helpers.hpp"

#include <boost/json/parse.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

namespace mira::store {

namespace fs = std::filesystem;

namespace detail {

/// What one submit() hands the writer's thread.
struct segment_item {
  case_batch batch;
  segment_writer::batch_fn done;
};

}  // namespace detail

// CRC-32C by the SSE 4.2 instruction where the processor has it (eight bytes a cycle or so,
// which keeps the checksum a small part of the writer's time), else by slicing-by-8 tables:
// eight bytes per step, several times faster than a byte at a time.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MIRA_CRC32C_SSE42 1
#endif

namespace {

constexpr std::array<std::array<std::uint32_t, 256>, 8> crc_tables = [] {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0u);
    t[0][i] = c;
  }
  for (std::size_t s = 1; s < 8; ++s)
    for (std::size_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  return t;
}();

std::uint32_t crc32c_tables(std::uint32_t c, const unsigned char* p, std::size_t n) {
  const auto& t = crc_tables;
  while (n >= 8) {
    std::uint32_t lo = c ^ (std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 |
                            std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return c;
}

#ifdef MIRA_CRC32C_SSE42
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t c,
                                                             const unsigned char* p,
                                                             std::size_t n) {
  std::uint64_t c64 = c;
  while (n >= 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);  // little-endian: the bytes in the order the tables take them
    c64 = __builtin_ia32_crc32di(c64, v);
    p += 8;
    n -= 8;
  }
  c = static_cast<std::uint32_t>(c64);
  while (n--) c = __builtin_ia32_crc32qi(c, *p++);
  return c;
}

bool has_sse42() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return has;
}
#endif

}  // namespace

std::uint32_t crc32c(std::string_view data, std::uint32_t before) {
  auto* p = reinterpret_cast<const unsigned char*>(data.data());
#ifdef MIRA_CRC32C_SSE42
  if (has_sse42()) return crc32c_sse42(before ^ 0xffffffffu, p, data.size()) ^ 0xffffffffu;
#endif
  return crc32c_tables(before ^ 0xffffffffu, p, data.size()) ^ 0xffffffffu;
}

namespace {

// `{"crc32c":"xxxxxxxx",` — the checksum covers everything after it up to the '\n'.
constexpr std::string_view line_head = R"({"crc32c":")";
constexpr std::size_t prefix_size = 21;
constexpr std::string_view key_head = R"("key":)";
constexpr std::string_view record_head = R"(,"record":)";
constexpr char hex_digits[] = "0123456789abcdef";

boost::system::error_code last_error() {
  return {errno, boost::system::system_category()};
}

std::string errno_text(int e) {
  return std::strerror(e);
}

bool is_json_object(std::string_view text) {
  if (text.empty() || text.front() != '{') return false;
  if (mira::detail::scan_json_value(text, 0) == text.size()) return true;
  // The skim accepts a strict subset; the parser decides the rest.
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec, {}, mira::detail::host_parse_options());
  return !ec && v.is_object();
}

// Appends the line for one record to `out`; false (and `out` unchanged) when the record is not
// one JSON object on one line or the key is not valid UTF-8. `checked`: both are known to be
// (case_batch::made_here(): a record append_case_line() wrote, under a key made of names the
// listing's JSON parser took), and skimming them again would cost the writer as much as the
// checksum does.
bool encode_line(std::string& out, std::string_view key, std::string_view record, bool checked) {
  if (!checked && (record.find('\n') != std::string_view::npos || !is_json_object(record)))
    return false;
  auto start = out.size();
  out += line_head;
  out += "00000000\",";
  auto body = out.size();
  out += key_head;
  auto key_at = out.size();
  protocol::append_json_string(out, key);
  if (!checked && mira::detail::scan_json_value(out, key_at) != out.size()) {
    out.resize(start);
    return false;
  }
  out += record_head;
  out += record;
  out += '}';
  auto crc = crc32c(std::string_view(out).substr(body));
  for (int i = 0; i < 8; ++i)
    out[start + line_head.size() + i] = hex_digits[(crc >> (28 - 4 * i)) & 15];
  out += '\n';
  return true;
}

// One line without its '\n': the key and the record's text, or why it is not a good line.
struct parsed_line {
  std::string key;
  std::string_view record;
  const char* problem = nullptr;
};

bool has_line_head(std::string_view line) {
  return line.size() >= prefix_size && line.substr(0, line_head.size()) == line_head &&
         line[19] == '"' && line[20] == ',';
}

// The key field after the prefix: the key and the offset just past it, or nothing.
std::optional<std::pair<std::string, std::size_t>> read_key(std::string_view line) {
  auto key_at = prefix_size + key_head.size();
  if (line.size() <= key_at || line.substr(prefix_size, key_head.size()) != key_head ||
      line[key_at] != '"')
    return std::nullopt;
  return detail::read_json_string(line, key_at);
}

parsed_line parse_line(std::string_view line) {
  parsed_line out;
  if (!has_line_head(line)) {
    out.problem = "not a segment line";
    return out;
  }
  std::uint32_t stored = 0;
  for (std::size_t i = line_head.size(); i < 19; ++i) {
    auto* d = std::strchr(hex_digits, line[i]);
    if (!d || !*d) {
      out.problem = "not a segment line";
      return out;
    }
    stored = stored << 4 | static_cast<std::uint32_t>(d - hex_digits);
  }
  if (crc32c(line.substr(prefix_size)) != stored) {
    out.problem = "checksum mismatch";
    return out;
  }
  // From here on the bytes are the ones written; a failure means a foreign writer.
  auto key = read_key(line);
  if (!key || line.substr(key->second, record_head.size()) != record_head || line.back() != '}') {
    out.problem = "not a segment line";
    return out;
  }
  out.key = std::move(key->first);
  auto key_end = key->second;
  auto record_at = key_end + record_head.size();
  out.record = line.substr(record_at, line.size() - 1 - record_at);
  if (!is_json_object(out.record)) out.problem = "record is not a JSON object";
  return out;
}

struct bad_line {
  std::size_t number;  // 1-based
  std::size_t offset;
  const char* problem;
  std::size_t good_before;  // good lines of the same bytes before it
};

// Walks the lines of one segment's bytes. Returns the offset just past the last good line:
// where a torn tail (the bad lines after it) begins.
template <class Good>
std::size_t scan_bytes(std::string_view bytes, Good&& good, std::vector<bad_line>& bad) {
  std::size_t pos = 0, valid_end = 0, number = 0, goods = 0;
  while (pos < bytes.size()) {
    ++number;
    auto nl = bytes.find('\n', pos);
    if (nl == std::string_view::npos) {
      bad.push_back({number, pos, "no end of line", goods});
      break;
    }
    auto parsed = parse_line(bytes.substr(pos, nl - pos));
    if (parsed.problem) {
      bad.push_back({number, pos, parsed.problem, goods});
    } else {
      good(std::move(parsed.key), parsed.record);
      ++goods;
      valid_end = nl + 1;
    }
    pos = nl + 1;
  }
  return valid_end;
}

// A file's bytes read into a buffer kept from one file to the next: a scan of many segments
// neither zero-fills nor faults in a new block of their size for each.
class file_buffer {
 public:
  tl::expected<std::string_view, int> read_all(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return tl::make_unexpected(errno);
    const auto size = static_cast<std::size_t>(st.st_size);
    if (size > capacity_) {
      bytes_.reset();  // the old block goes before the new one comes
      bytes_ = std::make_unique_for_overwrite<char[]>(size);
      capacity_ = size;
    }
    std::size_t done = 0;
    while (done < size) {
      auto n = ::pread(fd, bytes_.get() + done, size - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return tl::make_unexpected(errno);
      if (n == 0) break;  // shrank meanwhile
      done += static_cast<std::size_t>(n);
    }
    return std::string_view(bytes_.get(), done);
  }

 private:
  std::unique_ptr<char[]> bytes_;
  std::size_t capacity_ = 0;
};

std::string torn_tail_message(const fs::path& file, std::size_t at, std::size_t bytes,
                              const char* why) {
  return "torn tail dropped in " + file.string() + " at byte " + std::to_string(at) + " (" +
         std::to_string(bytes) + " bytes, " + why + ")";
}

std::string bad_line_message(const fs::path& file, const bad_line& b) {
  return std::string(b.problem) + " at " + file.string() + ":" + std::to_string(b.number) +
         " (byte " + std::to_string(b.offset) + "), line skipped";
}

std::optional<std::uint64_t> segment_number(const fs::path& file) {
  auto name = file.filename().string();
  constexpr std::string_view ext = ".ndjson";
  if (name.size() < 6 + ext.size() || name.compare(name.size() - ext.size(), ext.size(), ext) != 0)
    return std::nullopt;
  auto digits = std::string_view(name).substr(0, name.size() - ext.size());
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return n;
}

fs::path segment_path(const fs::path& dir, std::uint64_t number) {
  char name[32];
  std::snprintf(name, sizeof name, "%06llu.ndjson", static_cast<unsigned long long>(number));
  return dir / name;
}

// Creates segment `number` and makes its directory entry durable.
int create_segment(int dir_fd, const fs::path& dir, std::uint64_t number) {
  const auto name = segment_path(dir, number).filename();
  int fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  if (::fsync(dir_fd) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace

std::vector<fs::path> list_segments(const fs::path& dir) {
  std::vector<std::pair<std::uint64_t, fs::path>> found;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code ignored;
    // A link is listed as what it is, and its open (O_NOFOLLOW) then refuses it by name.
    if (!e.is_symlink(ignored) && !e.is_regular_file(ignored)) continue;
    if (auto n = segment_number(e.path())) found.emplace_back(*n, e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

segment_scan scan_segments(const std::vector<fs::path>& files, const segment_visitor& good) {
  segment_scan out;
  std::size_t goods = 0;  // good records of the files before this one
  file_buffer buffer;
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto& file = files[i];
    int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    auto bytes = fd < 0 ? tl::unexpected(errno) : buffer.read_all(fd);
    if (fd >= 0) ::close(fd);
    if (!bytes) {
      out.problems.push_back("cannot read " + store::detail::open_failure(file, bytes.error()));
      ++out.damaged_lines;  // its records are unknown, not merely unwritten
      out.damaged.push_back({std::nullopt, goods});
      continue;
    }
    const auto records_before = goods;
    const std::string_view all = *bytes;
    std::vector<bad_line> bad;
    auto valid_end = scan_bytes(
        all,
        [&](std::string key, std::string_view record) {
          good(std::move(key), record, i, static_cast<std::uint64_t>(record.data() - all.data()));
          ++goods;
        },
        bad);
    // Only the last segment is ever appended to, so only there can bad lines at the end be a
    // write that a crash interrupted.
    const bool last = i + 1 == files.size();
    for (auto& b : bad) {
      if (last && b.offset >= valid_end) {
        out.problems.push_back(
            torn_tail_message(file, valid_end, bytes->size() - valid_end, b.problem));
        break;
      }
      out.problems.push_back(bad_line_message(file, b));
      ++out.damaged_lines;
      std::optional<std::string> key;
      auto line = all.substr(b.offset);
      line = line.substr(0, line.find('\n'));
      if (has_line_head(line))
        if (auto k = read_key(line)) key = std::move(k->first);
      out.damaged.push_back({std::move(key), records_before + b.good_before});
    }
  }
  return out;
}

segment_scan read_segments(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  std::vector<segment_record> records;
  auto out = scan_segments(list_segments(dir), [&](std::string key, std::string_view record,
                                                   std::size_t, std::uint64_t) {
    records.push_back({std::move(key), std::string(record)});
  });
  out.records = std::move(records);
  return out;
}

tl::expected<std::unique_ptr<segment_writer>, error> segment_writer::open(const fs::path& dir,
                                                                          segment_options options) {
  auto io = [](std::string message) {
    return tl::make_unexpected(error{make_error_code(errc::io), std::move(message)});
  };
  std::error_code ec;
  const auto status = fs::symlink_status(dir, ec);
  if (!fs::exists(status)) {
    fs::create_directories(dir, ec);
    if (ec) return io("cannot create segment directory " + dir.string() + ": " + ec.message());
    if (auto e = store::detail::sync_directory(dir.parent_path()))
      return io("cannot sync " + dir.parent_path().string() + ": " + e.message());
  }
  // Never through a link: the segments of another folder are not this run's to cut or extend.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    const int err = errno;
    return tl::make_unexpected(
        error{make_error_code(store::detail::is_link(dir) ? errc::corrupt : errc::io),
              "cannot open segment directory " + store::detail::open_failure(dir, err)});
  }
  auto fail = [&](std::string message, int fd = -1, errc code = errc::io) {
    if (fd >= 0) ::close(fd);
    ::close(dir_fd);
    return tl::make_unexpected(error{make_error_code(code), std::move(message)});
  };
  if (::flock(dir_fd, LOCK_EX | LOCK_NB) != 0)
    return errno == EWOULDBLOCK
               ? fail("segment directory " + dir.string() + " is in use by another writer", -1,
                      errc::in_use)
               : fail("cannot lock segment directory " + dir.string() + ": " + errno_text(errno));
  std::vector<std::string> repairs;
  auto files = list_segments(dir);
  if (files.empty()) {
    int fd = create_segment(dir_fd, dir, 1);
    if (fd < 0)
      return fail("cannot create " + segment_path(dir, 1).string() + ": " + errno_text(errno));
    return std::unique_ptr<segment_writer>(new segment_writer(
        dir, options, dir_fd, fd, 1, 0, std::move(repairs), 0,
        options.journal.empty() ? nullptr : detail::case_journal::open(options.journal, {})));
  }
  for (auto& file : files) {
    struct stat st {};
    if (::fstatat(dir_fd, file.filename().c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
      return fail(
          "cannot append to " + dir.string() + ": " + store::detail::open_failure(file, ELOOP), -1,
          errc::corrupt);
  }
  auto& last = files.back();
  int fd = ::openat(dir_fd, last.filename().c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return fail("cannot open " + store::detail::open_failure(last, err), -1,
                store::detail::is_link(last) ? errc::corrupt : errc::io);
  }
  file_buffer buffer;
  auto bytes = buffer.read_all(fd);
  if (!bytes) return fail("cannot read " + last.string() + ": " + errno_text(bytes.error()), fd);
  std::vector<bad_line> bad;
  auto valid_end = scan_bytes(
      *bytes, [](std::string, std::string_view) {}, bad);
  if (valid_end < bytes->size()) {
    auto first_torn = std::find_if(bad.begin(), bad.end(),
                                   [&](const bad_line& b) { return b.offset >= valid_end; });
    if (::ftruncate(fd, static_cast<off_t>(valid_end)) != 0 || ::fdatasync(fd) != 0)
      return fail("cannot truncate the torn tail of " + last.string() + ": " + errno_text(errno),
                  fd);
    repairs.push_back(
        torn_tail_message(last, valid_end, bytes->size() - valid_end, first_torn->problem) +
        ", truncated");
  }
  auto journal =
      options.journal.empty() ? nullptr : detail::case_journal::open(options.journal, files);
  return std::unique_ptr<segment_writer>(new segment_writer(
      dir, options, dir_fd, fd, *segment_number(last), valid_end, std::move(repairs),
      static_cast<std::uint32_t>(files.size() - 1), std::move(journal)));
}

segment_writer::segment_writer(fs::path dir, segment_options options, int dir_fd, int fd,
                               std::uint64_t number, std::uint64_t size,
                               std::vector<std::string> repairs, std::uint32_t source,
                               std::unique_ptr<detail::case_journal> journal)
    : dir_(std::move(dir)),
      options_(std::move(options)),
      dir_fd_(dir_fd),
      fd_(fd),
      number_(number),
      source_(source),
      size_(size),
      repairs_(std::move(repairs)),
      journal_(std::move(journal)),
      thread_(std::make_unique<detail::batch_thread<detail::segment_item>>(
          options_.max_queued, [this](auto batch) { write_batch(batch); })) {}

fs::path segment_writer::current_segment() const {
  return segment_path(dir_, number_.load());
}

segment_writer::~segment_writer() {
  thread_->stop();  // before the segment and the directory (the lock) are closed
  // The segments as they stay; after a failed write, what is in them past the records it lists
  // is not known (a truncation may have failed too): no trailer, and the journal counts for none.
  if (journal_ && !error_) journal_->close(list_segments(dir_));
  if (fd_ >= 0) ::close(fd_);
  ::close(dir_fd_);  // releases the lock
}

void segment_writer::submit(std::string key, std::string record_json, done_fn done) {
  case_batch one;
  one.add(key, record_json);
  submit(std::move(one), [done = std::move(done)](case_batch&, auto results) {
    if (done) done(results[0]);
  });
}

void segment_writer::submit(case_batch batch, batch_fn done) {
  const auto records = batch.size();
  thread_->submit({std::move(batch), std::move(done)}, records);
}

void segment_writer::drain() {
  thread_->drain();
}

boost::system::error_code segment_writer::append(std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    auto n =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return last_error();
    done += static_cast<std::size_t>(n);
  }
  return {};
}

// After `lines` were made durable in the current segment from `segment_start` on.
void segment_writer::journal(std::span<const placed> lines, std::uint64_t segment_start) {
  if (!journal_) return;
  for (auto& l : lines)
    journal_->add({source_, segment_start + l.at, l.size, l.crc, l.state, l.key});
  if (!journal_->commit()) journal_.reset();
}

boost::system::error_code segment_writer::next_segment() {
  ::close(fd_);
  fd_ = create_segment(dir_fd_, dir_, ++number_);
  if (fd_ < 0) return last_error();
  ++source_;
  size_ = 0;
  return {};
}

void segment_writer::write_batch(std::span<detail::segment_item> batch) {
  const auto invalid = make_error_code(boost::system::errc::invalid_argument);
  std::size_t records = 0;
  for (auto& item : batch) records += item.batch.size();
  auto& out = out_;
  auto& result = results_;
  out.clear();
  result.assign(records, {});
  std::size_t first_pending = 0;  // the records whose lines are in `out` start here
  // Appends `out` and makes it durable; its records (those before `upto`) get the outcome. On
  // failure the segment is cut back to its last durable size, so no half batch stays behind.
  auto commit = [&](std::size_t upto) {
    auto ec = error_;
    if (!ec && !out.empty()) {
      ec = append(out);
      if (!ec && ::fdatasync(fd_) != 0) ec = last_error();
      if (ec) {
        error_ = ec;
        if (::ftruncate(fd_, static_cast<off_t>(size_)) == 0) ::fdatasync(fd_);
      } else {
        journal(placed_, size_);
        size_ += out.size();
      }
    }
    placed_.clear();
    for (auto i = first_pending; i < upto; ++i)
      if (result[i] != invalid) result[i] = ec;
    out.clear();
    first_pending = upto;
  };
  std::size_t n = 0;  // records seen, over all the items
  for (auto& item : batch) {
    const bool checked = item.batch.made_here();
    for (std::size_t r = 0; r < item.batch.size(); ++r, ++n) {
      auto before = out.size();
      const auto record = item.batch.record(r);
      if (!encode_line(out, item.batch.key(r), record, checked)) {
        result[n] = invalid;
        continue;
      }
      if (journal_) {
        // The record's text ends the line, before its "}\n".
        auto state = item.batch.state_code(r);
        if (!state)
          if (auto s = detail::record_state(record)) state = std::uint8_t(1 + int(*s));
        placed_.push_back({out.size() - 2 - record.size(), std::uint32_t(record.size()),
                           crc32c(record), state, item.batch.key(r)});
      }
      if (size_ + before > 0 && size_ + out.size() > options_.segment_bytes) {
        // This line goes to a new segment: the ones before it end the current one.
        std::string rest = out.substr(before);
        out.resize(before);
        std::optional<placed> moved;
        if (journal_) {
          moved = placed_.back();
          moved->at -= before;
          placed_.pop_back();
        }
        commit(n);
        if (!error_)
          if (auto ec = next_segment()) error_ = ec;
        out = std::move(rest);
        if (moved) placed_.push_back(*moved);
      }
    }
  }
  commit(records);
  n = 0;
  for (auto& item : batch) {
    const auto size = item.batch.size();
    if (item.done) item.done(item.batch, std::span(result).subspan(n, size));
    n += size;
  }
}

}  // namespace mira::store
