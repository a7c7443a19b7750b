// The failure of a layer above the host (plan, store, compare, config, serve): an error_code in
// the layer's own category, which callers decide on, and one line for people in the library's
// words. One definition; each layer names its own type (`store::error`, `compare::error`, ...)
// with a tag, so an expected of one layer's error is not taken for another's (`plan::error`
// adds the field it concerns).
#pragma once

#include <boost/system/error_code.hpp>

#include <string>

namespace mira {

template <class Layer>
struct coded_error {
  boost::system::error_code code;
  std::string text;

  const std::string& message() const { return text; }
};

}  // namespace mira
