// The server's error category (see error.hpp).
#include <mira/serve/error.hpp>

namespace mira::serve {

namespace {

class serve_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.serve"; }
  std::string message(int e) const override {
    switch (static_cast<errc>(e)) {
      case errc::invalid_address:
        return "the listen address is not an IP address";
      case errc::token_required:
        return "a non-loopback address needs a token";
      case errc::no_study:
        return "no study is allowed";
      case errc::duplicate_study:
        return "a study name is given twice";
      case errc::invalid_limit:
        return "a limit is zero";
      case errc::invalid_study_entry:
        return "not NAME=COMMAND";
      case errc::results_dir_unusable:
        return "the results directory cannot be created";
      case errc::address_in_use:
        return "the address is in use";
      case errc::bind_failed:
        return "cannot listen on the address";
    }
    return "unknown serve error";
  }
};

}  // namespace

const boost::system::error_category& category() noexcept {
  static const serve_category c;
  return c;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

}  // namespace mira::serve
