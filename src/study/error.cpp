// The study SDK's error category (see error.hpp).
#include <mira/study/error.hpp>

namespace mira::study {

namespace {

class study_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "mira.study"; }
  std::string message(int e) const override {
    switch (static_cast<errc>(e)) {
      case errc::unknown_method:
        return "unknown method";
      case errc::invalid_request:
        return "invalid request";
      case errc::invalid_params:
        return "invalid params";
      case errc::unknown_eval:
        return "no such eval";
      case errc::unknown_sample:
        return "no such sample";
      case errc::unknown_target:
        return "no such target";
      case errc::duplicate_id:
        return "a request with this id is in flight";
      case errc::cancelled:
        return "cancelled";
      case errc::subject_failed:
        return "the subject failed";
      case errc::scorer_failed:
        return "a scorer failed";
      case errc::sample_failed:
        return "a sample could not be made";
      case errc::file_unreadable:
        return "a file could not be read";
      case errc::file_unwritable:
        return "a file could not be written";
      case errc::file_too_large:
        return "a file is too large";
      case errc::dataset_invalid:
        return "a dataset record is invalid";
      case errc::unsafe_path:
        return "a path leads outside its folder";
      case errc::unknown_media_type:
        return "the media type is unknown or of another kind";
    }
    return "unknown study error";
  }
};

}  // namespace

const boost::system::error_category& category() noexcept {
  static const study_category c;
  return c;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

std::int64_t rpc_code(boost::system::error_code ec) noexcept {
  if (ec.category() != category()) return 0;
  switch (static_cast<errc>(ec.value())) {
    case errc::unknown_method:
      return -32601;
    case errc::invalid_request:
    case errc::duplicate_id:
      return -32600;
    case errc::invalid_params:
    case errc::unknown_eval:
    case errc::unknown_sample:
    case errc::unknown_target:
      return -32602;
    case errc::cancelled:
      return -32800;
    case errc::subject_failed:
    case errc::scorer_failed:
    case errc::sample_failed:
    case errc::file_unreadable:
    case errc::file_unwritable:
    case errc::file_too_large:
    case errc::dataset_invalid:
    case errc::unsafe_path:
    case errc::unknown_media_type:
      return -32603;
  }
  return 0;
}

protocol::rpc_error request_error::to_rpc() const {
  protocol::rpc_error e;
  e.code = rpc_code(code_);
  e.message = what();
  e.retryable = retryable_;
  return e;
}

void infra_error::apply_to(protocol::transcript& t) const {
  t.error = what();
  t.error_kind = protocol::error_kind::infra;
  if (!retry_after_) return;
  auto metadata = t.metadata.get();
  metadata["retry_after_ms"] = retry_after_->count();
  t.metadata = metadata;
}

}  // namespace mira::study
