// The HTTP client's plain functions: a response's header lookup and Retry-After (see http.hpp).
#include <mira/models/http.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>

namespace mira::models {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Splits on spaces, commas, '-' and ':' (every separator the three date forms use).
std::vector<std::string_view> date_tokens(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    auto start = s.find_first_not_of(" ,-:", i);
    if (start == std::string_view::npos) break;
    auto end = s.find_first_of(" ,-:", start);
    out.push_back(s.substr(start, end == std::string_view::npos ? end : end - start));
    i = end == std::string_view::npos ? s.size() : end;
  }
  return out;
}

std::optional<int> number(std::string_view s, std::size_t min_digits, std::size_t max_digits) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.size() < min_digits ||
      s.size() > max_digits)
    return std::nullopt;
  return v;
}

std::optional<unsigned> month(std::string_view s) {
  static constexpr std::array<std::string_view, 12> names = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (unsigned i = 0; i < names.size(); ++i)
    if (s == names[i]) return i + 1;
  return std::nullopt;
}

// The three forms of RFC 9110 section 5.6.7, as tokens:
//   IMF-fixdate  Sun, 06 Nov 1994 08:49:37 GMT   -> Sun 06 Nov 1994 08 49 37 GMT
//   RFC 850      Sunday, 06-Nov-94 08:49:37 GMT  -> Sunday 06 Nov 94 08 49 37 GMT
//   asctime      Sun Nov  6 08:49:37 1994        -> Sun Nov 6 08 49 37 1994
std::optional<std::chrono::system_clock::time_point> http_date(std::string_view s) {
  auto t = date_tokens(s);
  if (t.size() != 8 && t.size() != 7) return std::nullopt;
  std::optional<int> day, year, hh, mm, ss;
  std::optional<unsigned> mon;
  if (t.size() == 8 && t[7] == "GMT") {
    day = number(t[1], 1, 2);
    mon = month(t[2]);
    year = number(t[3], 2, 4);
    if (year && t[3].size() == 2) *year += *year < 70 ? 2000 : 1900;
    hh = number(t[4], 2, 2), mm = number(t[5], 2, 2), ss = number(t[6], 2, 2);
  } else if (t.size() == 7) {
    mon = month(t[1]);
    day = number(t[2], 1, 2);
    hh = number(t[3], 2, 2), mm = number(t[4], 2, 2), ss = number(t[5], 2, 2);
    year = number(t[6], 4, 4);
  }
  if (!day || !mon || !year || !hh || !mm || !ss || *hh > 23 || *mm > 59 || *ss > 60)
    return std::nullopt;
  std::chrono::year_month_day ymd{std::chrono::year(*year), std::chrono::month(*mon),
                                  std::chrono::day(static_cast<unsigned>(*day))};
  if (!ymd.ok()) return std::nullopt;
  return std::chrono::sys_days(ymd) + std::chrono::hours(*hh) + std::chrono::minutes(*mm) +
         std::chrono::seconds(*ss);
}

}  // namespace

std::optional<std::string_view> http_response::header(std::string_view name) const {
  for (const auto& h : headers)
    if (iequals(h.name, name)) return std::string_view(h.value);
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    // Saturated at 2^31 s (68 years): a longer run of digits still means "a long time".
    constexpr std::uint64_t cap = std::uint64_t{1} << 31;
    std::uint64_t seconds = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec == std::errc::result_out_of_range || seconds > cap) seconds = cap;
    return std::chrono::seconds(seconds);
  }
  auto when = http_date(value);
  if (!when) return std::nullopt;
  if (*when <= now) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(*when - now);
}

}  // namespace mira::models
