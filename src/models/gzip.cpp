// gunzip with zlib (see gzip.hpp).
#include "models/gzip.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>

namespace mira::models::detail {

namespace {

struct inflater {
  z_stream z{};
  bool ok = false;
  inflater() { ok = inflateInit2(&z, 16 + MAX_WBITS) == Z_OK; }  // 16: gzip framing only
  ~inflater() {
    if (ok) inflateEnd(&z);
  }
  inflater(const inflater&) = delete;
  inflater& operator=(const inflater&) = delete;
};

}  // namespace

tl::expected<std::string, errc> gunzip(std::string_view in, std::size_t max) {
  inflater inf;
  if (!inf.ok) return tl::make_unexpected(errc::malformed_response);
  std::string out;
  char chunk[16384];
  // zlib counts in uInt: feed at most UINT_MAX bytes at a time.
  auto feed = [&] {
    inf.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    inf.z.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size(), UINT_MAX));
  };
  feed();
  for (;;) {
    inf.z.next_out = reinterpret_cast<Bytef*>(chunk);
    inf.z.avail_out = sizeof chunk;
    const uInt before = inf.z.avail_in;
    int rc = inflate(&inf.z, Z_NO_FLUSH);
    in.remove_prefix(before - inf.z.avail_in);
    std::size_t produced = sizeof chunk - inf.z.avail_out;
    if (produced > max - out.size()) return tl::make_unexpected(errc::body_too_large);
    out.append(chunk, produced);
    if (rc == Z_STREAM_END) {
      if (in.empty()) return out;
      if (inflateReset(&inf.z) != Z_OK) return tl::make_unexpected(errc::malformed_response);
      feed();
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) return tl::make_unexpected(errc::malformed_response);
    // No progress with input left, or all input taken before the member's end: cut short.
    if (produced == 0 && (in.empty() || before == inf.z.avail_in))
      return tl::make_unexpected(errc::malformed_response);
    if (inf.z.avail_in == 0) feed();
  }
}

}  // namespace mira::models::detail
