// Numbers that come from outside (a manifest's JSON, a command line) turned into the integers
// and doubles the engine computes with, their range checked where they are read. A static_cast
// of a double outside the integer type's range is undefined behaviour (on x86 it wraps: a video
// max_pixels of 1e20, a user's "no limit", became the smallest size), and atof/atol read "abc"
// as 0 and "1e20" as whatever overflows; these helpers answer "out of range" instead.
//
// Example:
//   truncate_to<std::int64_t>(7.9)                              // 7, as Python's int()
//   truncate_to<std::int64_t>(1e20)                             // nullopt: outside int64
//   parse_number<double>("--step-ms", "250", 0, 86'400'000)     // 250
//   parse_number<double>("--step-ms", "1e20", 0, 86'400'000)    // kInvalidArgument:
//       "--step-ms takes a number in 0..86400000, not '1e20'"
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "mmfeed/error.h"

namespace mmfeed {

// `x` truncated toward zero (Python's int()), or nullopt when x is NaN or the truncation lies
// outside Int's range.
template <std::integral Int>
std::optional<Int> truncate_to(double x) {
  // Int's range as doubles, both exact: its minimum (0 or -2^digits), and 2^digits, one past its
  // maximum (the maximum itself may not be a double: 2^63 - 1 rounds up to 2^63).
  constexpr double kMin = static_cast<double>(std::numeric_limits<Int>::min());
  constexpr double kEnd = 2.0 * static_cast<double>(std::numeric_limits<Int>::max() / 2 + 1);
  const double t = std::trunc(x);
  if (!(t >= kMin && t < kEnd)) return std::nullopt;
  return static_cast<Int>(t);
}

// `x` as the shortest text that reads back as it ("86400000", "0.5", "1e+20").
inline std::string number_text(double x) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, x);
  return ec == std::errc() ? std::string(text, end) : std::string("?");
}

// The whole of `text` as a T in [lo, hi]: an integer type reads decimal digits with an optional
// '-', a floating type also a fraction and an exponent ("2.5", "1e3"). Anything else (trailing
// characters, spaces, a '+', "inf", "nan", a value outside [lo, hi]) is kInvalidArgument naming
// `what`, the range and the text.
template <class T>
requires std::integral<T> || std::floating_point<T> Result<T> parse_number(std::string_view what, std::string_view text,
                                                                           T lo, T hi) {
  T value{};
  const char* const last = text.data() + text.size();
  std::from_chars_result r{};
  if constexpr (std::floating_point<T>) {
    r = std::from_chars(text.data(), last, value, std::chars_format::general);
  } else {
    r = std::from_chars(text.data(), last, value, 10);
  }
  const bool read = r.ec == std::errc() && r.ptr == last && !text.empty();
  if (!read || !(value >= lo && value <= hi)) {  // NaN fails the range
    std::string range;
    if constexpr (std::floating_point<T>) {
      range = "a number in " + number_text(static_cast<double>(lo)) + ".." + number_text(static_cast<double>(hi));
    } else {
      range = "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    }
    return Error(ErrorCode::kInvalidArgument,
                 std::string(what) + " takes " + range + ", not '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace mmfeed
