// Errors as values: every fallible mmfeed call returns a Result<T> (or a Status, which is
// Result<void>) holding either its value or an Error {code, message, context}.
//
// Expected failures (a missing object, a corrupt image, a malformed manifest line) travel as
// values so the pipeline can count, report or skip them by policy. Exceptions are reserved for
// broken invariants, such as reading the value of a Result that holds an error.
//
// Example:
//   mmfeed::Result<int> parse_port(std::string_view s) {
//     int port = 0;
//     auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), port);
//     if (ec != std::errc() || end != s.data() + s.size())
//       return mmfeed::Error(mmfeed::ErrorCode::kInvalidArgument, "not a port number")
//           .with_context(std::string(s));
//     return port;
//   }
//   auto port = parse_port("80x");
//   if (!port.ok()) std::cerr << port.error().to_string() << "\n";  // "80x: not a port number"
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace mmfeed {

enum class ErrorCode : std::uint8_t {
  kInvalidArgument,    // the caller asked for something malformed (bad URI, bad option)
  kNotFound,           // object, file or key does not exist
  kPermissionDenied,   // credentials rejected or missing
  kIoError,            // the operating system or the network failed the operation
  kTimeout,            // a deadline passed
  kUnavailable,        // the peer is throttling or temporarily down (503 SlowDown)
  kCorruptData,        // the bytes do not decode: truncated JPEG, malformed JSON line
  kUnsupported,        // valid input mmfeed deliberately does not handle
  kResourceExhausted,  // a configured limit was hit (max pixels, max bytes, max tokens)
  kOutOfRange,         // index or range outside the data
  kCancelled,          // the operation was cancelled by its owner
  kInternal,           // a bug in mmfeed
};

// The stable lower-case name of a code ("not_found"), used in messages and metrics.
std::string_view error_code_name(ErrorCode code);

// Whether a failure with this code may succeed when tried again (timeouts, throttling, I/O).
bool is_retryable(ErrorCode code);

class [[nodiscard]] Error {
 public:
  Error(ErrorCode code, std::string message, std::string context = {})
      : code_(code), message_(std::move(message)), context_(std::move(context)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Where the failure happened: a URI, a sample id, a file and line. May be empty.
  const std::string& context() const { return context_; }

  // Adds an outer context: an error "JPEG truncated" with context "s3://b/k.jpg" given
  // "sample 17" reads "sample 17: s3://b/k.jpg: JPEG truncated".
  Error with_context(std::string_view outer) &&;
  Error with_context(std::string_view outer) const&;

  // "context: message", or the message alone when there is no context.
  std::string to_string() const;

 private:
  ErrorCode code_;
  std::string message_;
  std::string context_;
};

// Thrown only when a Result is used against its state (value() of an error, error() of a
// value): that is a bug in the caller, not an expected failure.
class BadResultAccess : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

template <class T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cvref_t<T>, Error>, "Result<Error> is meaningless");

 public:
  Result(const T& value) : state_(std::in_place_index<0>, value) {}
  Result(T&& value) : state_(std::in_place_index<0>, std::move(value)) {}
  template <class U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::remove_cvref_t<U>, Error> &&
           !std::is_same_v<std::remove_cvref_t<U>, Result> && !std::is_same_v<std::remove_cvref_t<U>, T>)
      Result(U&& value)
      : state_(std::in_place_index<0>, std::forward<U>(value)) {}
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    check_value();
    return *std::get_if<0>(&state_);
  }
  const T& value() const& {
    check_value();
    return *std::get_if<0>(&state_);
  }
  T&& value() && {
    check_value();
    return std::move(*std::get_if<0>(&state_));
  }
  T value_or(T fallback) const& { return ok() ? *std::get_if<0>(&state_) : std::move(fallback); }

  const Error& error() const& {
    check_error();
    return *std::get_if<1>(&state_);
  }
  Error&& error() && {
    check_error();
    return std::move(*std::get_if<1>(&state_));
  }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check_value() const {
    if (!ok()) throw BadResultAccess("value() of a failed Result: " + std::get<1>(state_).to_string());
  }
  void check_error() const {
    if (ok()) throw BadResultAccess("error() of a successful Result");
  }

  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  void value() const {
    if (!ok()) throw BadResultAccess("value() of a failed Status: " + error_->to_string());
  }
  const Error& error() const& {
    if (ok()) throw BadResultAccess("error() of a successful Status");
    return *error_;
  }
  Error&& error() && {
    if (ok()) throw BadResultAccess("error() of a successful Status");
    return std::move(*error_);
  }

 private:
  std::optional<Error> error_;
};

using Status = Result<void>;

inline Status ok_status() { return Status(); }

}  // namespace mmfeed

#define MMFEED_CONCAT_INNER_(a, b) a##b
#define MMFEED_CONCAT_(a, b) MMFEED_CONCAT_INNER_(a, b)

// Returns the error of a failed Result/Status from the enclosing function.
#define MMFEED_RETURN_IF_ERROR(expr)                                    \
  do {                                                                  \
    auto&& mmfeed_status_ = (expr);                                     \
    if (!mmfeed_status_.ok()) return std::move(mmfeed_status_).error(); \
  } while (0)

// `MMFEED_ASSIGN_OR_RETURN(auto x, f());` declares x from the value or returns the error.
#define MMFEED_ASSIGN_OR_RETURN(lhs, expr) \
  MMFEED_ASSIGN_OR_RETURN_IMPL_(MMFEED_CONCAT_(mmfeed_result_, __LINE__), lhs, expr)
#define MMFEED_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).error();       \
  lhs = std::move(tmp).value()
