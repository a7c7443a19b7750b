// SHA-256 and RFC 8785 canonical JSON (see digest.hpp).
#include "store/digest.hpp"

#include <mira/protocol/codec.hpp>
#include <mira/protocol/json_text.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

namespace mira::store {

namespace {

constexpr char hex[] = "0123456789abcdef";

}  // namespace

namespace {

// FIPS 180-4.
struct sha256 {
  std::array<std::uint32_t, 8> h{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  static constexpr std::uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};

  static std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void block(const unsigned char* p) {
    std::uint32_t w[64];
    for (std::size_t i = 0; i < 16; ++i)
      w[i] = std::uint32_t(p[4 * i]) << 24 | std::uint32_t(p[4 * i + 1]) << 16 |
             std::uint32_t(p[4 * i + 2]) << 8 | std::uint32_t(p[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      auto s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      auto s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    auto [a, b, c, d, e, f, g, hh] = h;
    for (int i = 0; i < 64; ++i) {
      auto s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      auto ch = (e & f) ^ (~e & g);
      auto t1 = hh + s1 + ch + k[i] + w[i];
      auto s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      auto maj = (a & b) ^ (a & c) ^ (b & c);
      auto t2 = s0 + maj;
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
};

}  // namespace

namespace {

// Keys compare by UTF-16 code units in JCS; for UTF-8 that is byte order except across the BMP
// boundary, which keys of eval listings do not reach in practice.
std::vector<const boost::json::key_value_pair*> sorted_members(const boost::json::object& o) {
  std::vector<const boost::json::key_value_pair*> members;
  for (auto& kv : o) members.push_back(&kv);
  std::sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->key() < b->key(); });
  return members;
}

void canonical(std::string& out, const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null:
      out += "null";
      return;
    case boost::json::kind::bool_:
      out += v.get_bool() ? "true" : "false";
      return;
    case boost::json::kind::int64:
      out += std::to_string(v.get_int64());
      return;
    case boost::json::kind::uint64:
      out += std::to_string(v.get_uint64());
      return;
    case boost::json::kind::double_: {
      double d = v.get_double();
      if (d == 0)
        out += '0';  // -0 too, as RFC 8785 wants
      else
        protocol::append_json_number(out, d);
      return;
    }
    case boost::json::kind::string:
      protocol::append_json_string(out, v.get_string());
      return;
    case boost::json::kind::array: {
      out += '[';
      bool first = true;
      for (auto& e : v.get_array()) {
        if (!first) out += ',';
        first = false;
        canonical(out, e);
      }
      out += ']';
      return;
    }
    case boost::json::kind::object: {
      out += '{';
      bool first = true;
      for (auto* kv : sorted_members(v.get_object())) {
        if (!first) out += ',';
        first = false;
        canonical(out, boost::json::value(kv->key()));
        out += ':';
        canonical(out, kv->value());
      }
      out += '}';
      return;
    }
  }
}

}  // namespace

std::string canonical_json(const boost::json::value& v) {
  std::string out;
  canonical(out, v);
  return out;
}

struct sha256_stream::state {
  sha256 s;
  unsigned char pending[64] = {};
  std::size_t pending_size = 0;
  std::uint64_t size = 0;
};

sha256_stream::sha256_stream() : s_(std::make_unique<state>()) {}
sha256_stream::~sha256_stream() = default;

void sha256_stream::update(std::string_view data) {
  auto& st = *s_;
  st.size += data.size();
  auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  if (st.pending_size > 0) {
    const auto take = std::min(n, 64 - st.pending_size);
    std::memcpy(st.pending + st.pending_size, bytes, take);
    st.pending_size += take;
    bytes += take;
    n -= take;
    if (st.pending_size < 64) return;
    st.s.block(st.pending);
    st.pending_size = 0;
  }
  for (; n >= 64; bytes += 64, n -= 64) st.s.block(bytes);
  std::memcpy(st.pending, bytes, n);
  st.pending_size = n;
}

std::string sha256_stream::hex_digest() {
  auto& st = *s_;
  unsigned char tail[128] = {};
  const std::size_t rest = st.pending_size;
  std::memcpy(tail, st.pending, rest);
  tail[rest] = 0x80;
  std::size_t len = rest + 1 + 8 <= 64 ? 64 : 128;
  const std::uint64_t bits = st.size * 8;
  for (int i = 0; i < 8; ++i) tail[len - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  st.s.block(tail);
  if (len == 128) st.s.block(tail + 64);
  std::string out;
  for (auto word : st.s.h)
    for (int i = 28; i >= 0; i -= 4) out += hex[(word >> i) & 15];
  return out;
}

std::string sha256_hex(std::string_view data) {
  sha256_stream s;
  s.update(data);
  return s.hex_digest();
}

void canonical_json_to(const boost::json::object& o, std::string_view key,
                       const std::function<void(const text_sink&)>& write_value,
                       const text_sink& sink) {
  std::string out = "{";
  bool first = true;
  for (auto* kv : sorted_members(o)) {
    if (!first) out += ',';
    first = false;
    canonical(out, boost::json::value(kv->key()));
    out += ':';
    if (kv->key() != key) {
      canonical(out, kv->value());
      continue;
    }
    sink(out);
    out.clear();
    write_value(sink);
  }
  out += '}';
  sink(out);
}

}  // namespace mira::store
