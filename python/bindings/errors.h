// The one mapping from the engine's errors to Python exceptions, for every binding: what the
// caller gave (options, data, files, names) is wrong: ValueError, with the engine's message
// (which names the sample, file or option); a fault of the engine itself: RuntimeError.
#pragma once

#include <nanobind/nanobind.h>

#include <utility>

#include "mmfeed/error.h"

namespace mmfeed::python {

[[noreturn]] inline void raise_error(const Error& e) {
  if (e.code() == ErrorCode::kInternal) {
    throw nanobind::builtin_exception(nanobind::exception_type::runtime_error, e.to_string().c_str());
  }
  throw nanobind::value_error(e.to_string().c_str());
}

// The value of `r`, or its error raised.
template <class T>
T value_or_raise(Result<T> r) {
  if (!r.ok()) raise_error(r.error());
  return std::move(r).value();
}

inline void raise_if_error(const Status& s) {
  if (!s.ok()) raise_error(s.error());
}

}  // namespace mmfeed::python
