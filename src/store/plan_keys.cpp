// plan-keys.ndjson (see plan_keys.hpp): written piece by piece with its checksum, read whole.
#include "store/plan_keys.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>
#include "store/file_helpers.hpp"
#include "store/segment_log.hpp"

#include <boost/json/parse.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>

namespace mira::store::detail {

namespace fs = std::filesystem;
namespace json = boost::json;
using boost::system::error_code;

namespace {

constexpr int format = 1;

error_code last_error() {
  return {errno, boost::system::system_category()};
}

// The file's bytes through one descriptor: what goes out is checksummed on the way, and the first
// error sticks (a key source cannot be stopped half-way).
class checksummed_out {
 public:
  explicit checksummed_out(int fd) : fd_(fd) { buffer_.reserve(chunk + 256); }
  std::string& buffer() { return buffer_; }
  void maybe_flush() {
    if (buffer_.size() >= chunk) flush();
  }
  void flush() {
    crc_ = crc32c(buffer_, crc_);
    if (!error_) error_ = write_all(fd_, buffer_);
    buffer_.clear();
  }
  std::uint32_t crc() const { return crc_; }
  error_code error() const { return error_; }

 private:
  static constexpr std::size_t chunk = std::size_t{1} << 20;
  int fd_;
  std::string buffer_;
  std::uint32_t crc_ = 0;
  error_code error_;
};

// Writes the whole file to `fd`.
error_code write_contents(int fd, std::size_t session, std::string_view started,
                          const plan_keys& keys) {
  checksummed_out out(fd);
  auto& b = out.buffer();
  b += R"({"plan_keys":)" + std::to_string(format) + R"(,"session":)" + std::to_string(session) +
       R"(,"started":)";
  protocol::append_json_string(b, started);
  b += "}\n";
  std::size_t count = 0;
  keys([&](std::string_view key) {
    protocol::append_json_string(out.buffer(), key);
    out.buffer() += '\n';
    ++count;
    out.maybe_flush();
  });
  out.flush();
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", static_cast<unsigned>(out.crc()));
  b += R"({"keys":)" + std::to_string(count) + R"(,"crc32c":")" + crc + "\"}\n";
  out.flush();
  if (out.error()) return out.error();
  return ::fsync(fd) == 0 ? error_code{} : last_error();
}

// A line's JSON object, or nothing.
std::optional<json::object> object_of(std::string_view line) {
  error_code ec;
  auto v = json::parse(line, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

std::optional<std::uint64_t> count_in(const json::object& o, std::string_view name) {
  auto* v = o.if_contains(name);
  if (!v || !v->is_int64() || v->get_int64() < 0) return std::nullopt;
  return static_cast<std::uint64_t>(v->get_int64());
}

// The trailer `{"keys":N,"crc32c":"xxxxxxxx"}`: the count, when the checksum holds for `before`.
tl::expected<std::uint64_t, std::string> check_trailer(std::string_view trailer,
                                                       std::string_view before) {
  auto o = object_of(trailer);
  auto keys = o ? count_in(*o, "keys") : std::nullopt;
  auto* crc = o ? o->if_contains("crc32c") : nullptr;
  std::uint32_t stored = 0;
  if (!keys || !crc || !crc->is_string() || crc->get_string().size() != 8 ||
      std::from_chars(crc->get_string().data(), crc->get_string().data() + 8, stored, 16).ptr !=
          crc->get_string().data() + 8)
    return tl::make_unexpected(std::string("its last line is no count and checksum (cut short?)"));
  if (crc32c(before) != stored) return tl::make_unexpected(std::string("checksum mismatch"));
  return *keys;
}

}  // namespace

error_code write_plan_keys(const fs::path& folder, std::size_t session, std::string_view started,
                           const plan_keys& keys) {
  int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return last_error();
  const auto temp = temp_path_for(folder / plan_keys_file).filename().string();
  error_code ec;
  int fd = ::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    ec = last_error();
  } else {
    ec = write_contents(fd, session, started, keys);
    if (::close(fd) != 0 && !ec) ec = last_error();
    if (!ec && ::renameat(dir, temp.c_str(), dir, plan_keys_file) != 0) ec = last_error();
    if (ec) ::unlinkat(dir, temp.c_str(), 0);
    // The rename made durable: a crash must not bring back an earlier session's file.
    if (!ec && ::fsync(dir) != 0) ec = last_error();
  }
  ::close(dir);
  return ec;
}

tl::expected<bool, std::string> decode_plan_keys(std::string_view text, const run_meta& meta,
                                                 const std::function<void(std::string_view)>& key) {
  auto damaged = [](std::string why) { return tl::make_unexpected("damaged: " + std::move(why)); };
  if (text.size() < 2 || text.back() != '\n')
    return damaged("its last line has no end (cut short?)");
  const auto header_end = text.find('\n');
  const auto trailer_at = text.rfind('\n', text.size() - 2) + 1;  // 0 when there is one line
  if (trailer_at == 0 || trailer_at <= header_end)
    return damaged("it has no first and last line (cut short?)");
  auto count = check_trailer(text.substr(trailer_at, text.size() - 1 - trailer_at),
                             text.substr(0, trailer_at));
  if (!count) return damaged(count.error());
  // From here on the bytes are the ones written: a failure means another writer.
  auto header = object_of(text.substr(0, header_end));
  auto* started = header ? header->if_contains("started") : nullptr;
  auto session = header ? count_in(*header, "session") : std::nullopt;
  if (!header || count_in(*header, "plan_keys") != std::uint64_t{format} || !session || !started ||
      !started->is_string())
    return tl::make_unexpected(std::string("its first line is not the header of a format ") +
                               std::to_string(format) + " plan-keys file");
  auto& sessions = meta.sessions;
  if (sessions.empty() || *session != sessions.size() ||
      started->get_string() != sessions.back().started)
    return false;
  if (*count != sessions.back().planned)
    return tl::make_unexpected("it holds " + std::to_string(*count) + " key(s), session " +
                               std::to_string(*session) + " planned " +
                               std::to_string(sessions.back().planned));
  std::uint64_t seen = 0;
  for (auto at = header_end + 1; at < trailer_at; ++seen) {
    const auto end = text.find('\n', at);
    auto k = read_json_string(text, at);
    if (!k || k->second != end)
      return tl::make_unexpected("line " + std::to_string(seen + 2) + " is not a JSON string");
    key(k->first);
    at = end + 1;
  }
  if (seen != *count)
    return tl::make_unexpected("it holds " + std::to_string(seen) + " key(s), its last line says " +
                               std::to_string(*count));
  return true;
}

tl::expected<bool, std::string> read_plan_keys(const fs::path& folder, const run_meta& meta,
                                               const std::function<void(std::string_view)>& key) {
  const auto file = folder / plan_keys_file;
  int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return false;
  if (fd < 0) return tl::make_unexpected(open_failure(file, errno));
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[64 << 10];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto why = open_failure(file, errno);
      ::close(fd);
      return tl::make_unexpected(why);
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  auto found = decode_plan_keys(text, meta, key);
  if (!found) return tl::make_unexpected(file.string() + ": " + found.error());
  return found;
}

}  // namespace mira::store::detail
