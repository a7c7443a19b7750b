// The planner's error category (see error.hpp).
#include <mira/plan/error.hpp>

namespace mira::plan {

namespace {

class plan_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.plan"; }
  std::string message(int e) const override {
    switch (static_cast<errc>(e)) {
      case errc::no_match:
        return "the selection matches nothing";
      case errc::duplicate_key:
        return "two cases have the same key";
      case errc::invalid_shard:
        return "not a shard I/N";
      case errc::no_shard_env:
        return "the environment names no shard";
    }
    return "unknown plan error";
  }
};

}  // namespace

const boost::system::error_category& category() noexcept {
  static const plan_category c;
  return c;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

}  // namespace mira::plan
