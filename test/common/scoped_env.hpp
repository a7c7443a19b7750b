// Test helper: an environment variable set (or unset) for a scope, and restored after it.
#pragma once

#include <stdlib.h>

#include <optional>
#include <string>

namespace mira::test {

class scoped_env {
 public:
  /// Sets `name` to `value`, or unsets it for a null `value`.
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~scoped_env() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace mira::test
