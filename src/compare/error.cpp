// The comparison's error category (see error.hpp).
#include <mira/compare/error.hpp>

namespace mira::compare {

namespace {

class compare_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.compare"; }
  std::string message(int e) const override {
    switch (static_cast<errc>(e)) {
      case errc::other_study:
        return "the runs are of different studies";
      case errc::invalid_alpha:
        return "alpha is not between 0 and 1";
      case errc::unknown_group:
        return "no case has the group key";
    }
    return "unknown compare error";
  }
};

}  // namespace

const boost::system::error_category& category() noexcept {
  static const compare_category c;
  return c;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

}  // namespace mira::compare
