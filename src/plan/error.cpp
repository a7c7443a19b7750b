// The planner's error category and its fields (see error.hpp).
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

std::string_view to_string(field f) {
  switch (f) {
    case field::none:
      return {};
    case field::evals:
      return "evals";
    case field::samples:
      return "samples";
    case field::targets:
      return "targets";
    case field::tags:
      return "tags";
    case field::axes:
      return "axes";
    case field::shard:
      return "shard";
  }
  return {};
}

error make_error(errc e, plan::field f, std::string_view rest) {
  error out{{make_error_code(e), std::string(to_string(f))}, f};
  out.text += rest;
  return out;
}

}  // namespace mira::plan
