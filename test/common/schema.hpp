// Where the tests find the protocol's JSON Schema (and the NDJSON validator beside it), and a
// Boost.Test precondition that skips a test needing them, saying why, when they are absent:
// a clone without ../shared still passes its own tests.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

namespace mira::test {

/// The directory holding schema.json and conformance/: $MIRA_SCHEMA_DIR, else the build's
/// default (../shared/mira-schema/v1 beside the repository). nullopt when it has no schema.json.
inline std::optional<std::filesystem::path> schema_dir() {
  const char* env = std::getenv("MIRA_SCHEMA_DIR");
  std::filesystem::path dir = env && *env ? env : MIRA_DEFAULT_SCHEMA_DIR;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / "schema.json", ec)) return std::nullopt;
  return dir;
}

/// validate_ndjson.py: $MIRA_NDJSON_VALIDATOR, else ../shared/tools/validate_ndjson.py beside
/// the repository. nullopt when the file is not there.
inline std::optional<std::filesystem::path> ndjson_validator() {
  const char* env = std::getenv("MIRA_NDJSON_VALIDATOR");
  std::filesystem::path file = env && *env ? env : MIRA_DEFAULT_NDJSON_VALIDATOR;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  return file;
}

// Printed on stdout, where CTest's SKIP_REGULAR_EXPRESSION (cmake/BoostTestDiscoverScript.cmake)
// sees it and reports the test as skipped; Boost.Test itself only logs a skip at test_suite level.
inline boost::test_tools::assertion_result skip_test_because(const std::string& reason) {
  std::printf("mira test skipped: %s\n", reason.c_str());
  std::fflush(stdout);
  boost::test_tools::assertion_result r(false);
  r.message() << reason;
  return r;
}

/// Precondition (`* boost::unit_test::precondition(needs_schema)`): the schema is there.
inline boost::test_tools::assertion_result needs_schema(boost::unit_test::test_unit_id) {
  if (schema_dir()) return true;
  return skip_test_because(
      "no protocol schema: set MIRA_SCHEMA_DIR to a directory with schema.json "
      "(default " MIRA_DEFAULT_SCHEMA_DIR ")");
}

/// Precondition: the schema and validate_ndjson.py are there.
inline boost::test_tools::assertion_result needs_schema_and_validator(
    boost::unit_test::test_unit_id id) {
  if (auto r = needs_schema(id); !r) return r;
  if (ndjson_validator()) return true;
  return skip_test_because(
      "no validate_ndjson.py: set MIRA_NDJSON_VALIDATOR to its path "
      "(default " MIRA_DEFAULT_NDJSON_VALIDATOR ")");
}

}  // namespace mira::test
