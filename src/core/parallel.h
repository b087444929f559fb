// fn(i) for i in [0, n) on up to `threads` threads, the caller's among them: the one-call
// processors' (ImageProcessor, AudioProcessor) fan-out, where a pool would outlive the call.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

namespace mmfeed::core {

// Fewer threads when the system refuses one: the threads started and the caller's do the work.
template <class F>
void parallel(std::size_t n, int threads, F&& fn) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  try {
    for (std::size_t w = 1; w < std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), n); ++w) {
      pool.emplace_back(work);
    }
  } catch (const std::system_error&) {
  }
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace mmfeed::core
