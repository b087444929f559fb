#include "mmfeed/error.h"

namespace mmfeed {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kPermissionDenied: return "permission_denied";
    case ErrorCode::kIoError: return "io_error";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kCorruptData: return "corrupt_data";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kOutOfRange: return "out_of_range";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

bool is_retryable(ErrorCode code) {
  return code == ErrorCode::kTimeout || code == ErrorCode::kUnavailable || code == ErrorCode::kIoError;
}

Error Error::with_context(std::string_view outer) && {
  if (!outer.empty()) {
    context_ = context_.empty() ? std::string(outer) : std::string(outer) + ": " + context_;
  }
  return std::move(*this);
}

Error Error::with_context(std::string_view outer) const& { return Error(*this).with_context(outer); }

std::string Error::to_string() const { return context_.empty() ? message_ : context_ + ": " + message_; }

}  // namespace mmfeed
