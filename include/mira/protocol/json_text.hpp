// JSON text as the host writes it everywhere (files, streams, wire frames): no whitespace,
// members in their stored order, strings with the minimal escapes, and numbers in their shortest
// round-trip form ("1", "0.5", "1e+21") instead of Boost.JSON 1.81's "1E0" and "5E-1".
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <string>

namespace mira::protocol {

/// The JSON text of `v`: like boost::json::serialize (member order kept, no whitespace, the
/// same string escapes), but every double in the ECMAScript / RFC 8785 number form: the
/// shortest digits that read back as the same double, integral values below 1e21 as integers,
/// exponents as e+21 / e-7; -0.0 as "-0.0" (so that it reads back as a double). A non-finite double
/// (which JSON cannot hold) is null.
std::string to_json_text(const boost::json::value& v);
std::string to_json_text(const boost::json::object& o);
std::string to_json_text(const boost::json::array& a);

/// to_json_text appended to `out`, for writers that build a line or a frame piece by piece.
void append_json_text(std::string& out, const boost::json::value& v);
void append_json_text(std::string& out, const boost::json::object& o);
void append_json_text(std::string& out, const boost::json::array& a);

/// One double in that number form, appended to `out`.
void append_json_number(std::string& out, double d);

}  // namespace mira::protocol
