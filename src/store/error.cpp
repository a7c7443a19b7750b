// The store's error category (see error.hpp).
#include <mira/store/error.hpp>

namespace mira::store {

namespace {

class store_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.store"; }
  std::string message(int e) const override {
    switch (static_cast<errc>(e)) {
      case errc::in_use:
        return "the run is in use";
      case errc::not_found:
        return "no such saved run";
      case errc::invalid_id:
        return "not a run id";
      case errc::exists:
        return "the run exists";
      case errc::corrupt:
        return "a file of the run cannot be read";
      case errc::incompatible:
        return "the saved run does not match";
      case errc::io:
        return "the file system refused";
    }
    return "unknown store error";
  }
};

}  // namespace

const boost::system::error_category& category() noexcept {
  static const store_category c;
  return c;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

}  // namespace mira::store
