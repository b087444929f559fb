// Monotonic time in nanoseconds, the one clock every stage, metric and trace event uses.
#pragma once

#include <chrono>
#include <cstdint>

namespace mmfeed::core {

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Measures elapsed time from construction or the last restart().
//
// Example:
//   Stopwatch sw;
//   decode(...);
//   histogram.record(sw.elapsed_ns());
class Stopwatch {
 public:
  Stopwatch() : start_(now_ns()) {}
  std::int64_t elapsed_ns() const { return now_ns() - start_; }
  double elapsed_s() const { return static_cast<double>(elapsed_ns()) * 1e-9; }
  void restart() { start_ = now_ns(); }

 private:
  std::int64_t start_;
};

}  // namespace mmfeed::core
