// Natural order (see natural_order.hpp).
#include "plan/natural_order.hpp"

namespace mira::plan {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// <0, 0 or >0 as `a` sorts before, with or after `b` with digit runs taken by value.
int natural_compare(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      while (i < a.size() && a[i] == '0') ++i;
      while (j < b.size() && b[j] == '0') ++j;
      std::size_t si = i, sj = j;
      while (i < a.size() && is_digit(a[i])) ++i;
      while (j < b.size() && is_digit(b[j])) ++j;
      // More significant digits is a larger number; the same count compares digit by digit.
      if (i - si != j - sj) return i - si < j - sj ? -1 : 1;
      if (int c = a.substr(si, i - si).compare(b.substr(sj, j - sj))) return c;
      continue;
    }
    auto ca = static_cast<unsigned char>(a[i]), cb = static_cast<unsigned char>(b[j]);
    if (ca != cb) return ca < cb ? -1 : 1;
    ++i;
    ++j;
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  return 0;
}

}  // namespace

bool natural_less(std::string_view a, std::string_view b) {
  if (int c = natural_compare(a, b)) return c < 0;
  return a < b;
}

}  // namespace mira::plan
