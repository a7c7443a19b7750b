// The response cache (see cache.hpp): entries as whole files, written by rename.
#include <mira/models/cache.hpp>

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace mira::models {

namespace json = boost::json;

namespace {

void append_canonical(std::string& out, const json::value& v) {
  if (const auto* o = v.if_object()) {
    std::vector<const json::key_value_pair*> members;
    members.reserve(o->size());
    for (const auto& kv : *o) members.push_back(&kv);
    std::sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->key() < b->key(); });
    out += '{';
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (i) out += ',';
      out += json::serialize(json::string_view(members[i]->key()));
      out += ':';
      append_canonical(out, members[i]->value());
    }
    out += '}';
  } else if (const auto* a = v.if_array()) {
    out += '[';
    for (std::size_t i = 0; i < a->size(); ++i) {
      if (i) out += ',';
      append_canonical(out, (*a)[i]);
    }
    out += ']';
  } else {
    out += json::serialize(v);
  }
}

// A name no other writer of this entry picks: this process's id, and a count and a random
// number of its own.
std::string temporary_name(std::string_view digest) {
  static std::atomic<unsigned long> count{0};
  static const unsigned long seed = std::random_device{}();
  std::ostringstream name;
  name << '.' << digest << '.' << ::getpid() << '.' << seed << '.' << count++ << ".tmp";
  return name.str();
}

// A regular file's bytes; nullopt for anything that cannot be read whole (POSIX calls: a
// filebuf throws where this is a plain miss, a folder in the entry's place).
std::optional<std::string> read_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    text.emplace(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < text->size()) {
      const auto n = ::read(fd, text->data() + got, text->size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got != text->size()) text.reset();
  }
  ::close(fd);
  return text;
}

}  // namespace

response_cache::response_cache(std::filesystem::path folder, cache_mode mode)
    : folder_(std::move(folder)), mode_(folder_.empty() ? cache_mode::off : mode) {}

response_cache response_cache::from_environment() {
  const char* dir = std::getenv("MIRA_CACHE_DIR");
  if (!dir || !*dir) return {};
  const char* m = std::getenv("MIRA_CACHE_MODE");
  std::string_view mode = m ? m : "";
  if (mode.empty() || mode == "read-write") return {dir, cache_mode::read_write};
  if (mode == "read-only") return {dir, cache_mode::read_only};
  if (mode == "off") return {};
  throw std::invalid_argument("MIRA_CACHE_MODE is \"" + std::string(mode) +
                              "\": it is read-write, read-only or off");
}

std::filesystem::path response_cache::entry_path(std::string_view key) const {
  auto digest = sha256_hex(key);
  return folder_ / digest.substr(0, 2) / (digest + ".json");
}

std::optional<std::string> response_cache::find(std::string_view key) const {
  if (mode_ == cache_mode::off) return std::nullopt;
  auto text = read_file(entry_path(key));
  if (!text) return std::nullopt;
  boost::system::error_code ec;
  auto v = json::parse(*text, ec);
  // An entry is {"key": the key, "value": the value}: anything else is a miss.
  const auto* o = ec ? nullptr : v.if_object();
  const auto* k = o ? o->if_contains("key") : nullptr;
  const auto* value = o ? o->if_contains("value") : nullptr;
  if (!k || !k->is_string() || k->get_string() != key || !value || !value->is_string())
    return std::nullopt;
  return std::string(value->get_string());
}

bool response_cache::store(std::string_view key, std::string_view value) const {
  if (mode_ != cache_mode::read_write) return false;
  const auto path = entry_path(key);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return false;
  const auto temporary = path.parent_path() / temporary_name(path.stem().string());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << json::serialize(json::object{{"key", key}, {"value", value}});
    out.close();
    if (!out) {
      std::filesystem::remove(temporary, ec);
      return false;  // a full disk, a folder not writable: the entry is left out
    }
  }
  std::filesystem::rename(temporary, path, ec);
  if (!ec) return true;
  std::error_code ignored;
  std::filesystem::remove(temporary, ignored);
  return false;
}

std::string canonical_json(const json::value& v) {
  std::string out;
  append_canonical(out, v);
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

}  // namespace mira::models
