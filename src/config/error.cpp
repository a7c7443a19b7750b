// The config layer's error category (see error.hpp).
#include <mira/config/error.hpp>

namespace mira::config {

namespace {

class config_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.config"; }
  std::string message(int e) const override {
    switch (static_cast<errc>(e)) {
      case errc::not_found:
        return "no such preset, launcher or file";
      case errc::invalid:
        return "a value cannot be used";
      case errc::conflict:
        return "options that do not go together";
      case errc::missing_program:
        return "a program is not on PATH";
      case errc::no_study:
        return "no study to run";
      case errc::io:
        return "the file system refused";
    }
    return "unknown config error";
  }
};

}  // namespace

const boost::system::error_category& category() noexcept {
  static const config_category c;
  return c;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

}  // namespace mira::config
