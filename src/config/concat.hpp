// Text helpers shared by the config sources (private to the library).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace mira::config::detail {

// Pieces joined into one string (one allocation, where `+` would make a temporary per piece).
inline std::string concat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += p;
  return out;
}

}  // namespace mira::config::detail
