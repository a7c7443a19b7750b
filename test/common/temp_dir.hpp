// A fresh directory under the system temp directory, removed with everything in it by the
// destructor.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace mira::test {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    char tmpl[] = "/tmp/mira-test-XXXXXX";
    if (::mkdtemp(tmpl)) path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace mira::test
