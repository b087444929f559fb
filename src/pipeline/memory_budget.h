// The memory budget: what the concurrent loader holds between fetch and trainer stays under
// max_buffered_bytes. The reader admits a sample only while what is held, plus what the samples
// admitted but not yet processed are expected to hold (the mean of the samples processed so far),
// stays under the budget, and never more than `window` samples at once; fetched bytes, decoded
// pixels and token ids are held by their sample until the batcher takes it; a batch is held from
// when it is queued until the trainer takes it, and the batcher waits before queueing past the
// budget (unless the queue is empty: one batch always fits). The fetcher bounds what is in flight
// itself (FetchOptions::max_inflight_bytes).
//
// The window follows the prefetch depth and its fetch allowance (sample_window;
// pipeline/prefetch_depth.h).
//
// Thread safety: every method may be called from any thread. admit() is called by the reader,
// hold() by the collector and the CPU workers, processed() by the workers, leave() and
// wait_for_batch() by the batcher, batch_taken() and set_window() by the trainer; stop() by
// close().
//
// Example:
//   MemoryBudget budget(config.max_buffered_bytes, /*window=*/64, /*first_admits=*/16);
//   if (!budget.admit()) return;        // reader: stopped
//   budget.hold(sample, bytes.size());  // collector
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "mmfeed/loader.h"
#include "pipeline/prefetch_depth.h"
#include "pipeline/sample.h"
#include "pipeline/stage_options.h"

namespace mmfeed::pipeline {

class MemoryBudget {
 public:
  // `window`: the most samples admitted and not yet taken by the batcher; `first_admits`: how
  // many are admitted before any sample has been measured.
  MemoryBudget(std::uint64_t max_bytes, std::size_t window, std::int64_t first_admits);

  // Reader: waits until one more sample fits, then admits it; false once stopped.
  bool admit();
  // Collector and workers: `sample` now holds `delta` bytes more (or fewer, when negative).
  void hold(Work& sample, std::int64_t delta);
  // Worker: `sample` is processed; a good one's bytes refine the estimate admission uses.
  void processed(const Work& sample);
  // Batcher: took `sample` out of the ready set; its bytes and its window slot are free.
  void leave(Work& sample);
  // Batcher: waits until a batch of `bytes` fits beside what is held (or `queue_empty()`), then
  // holds it; false once stopped. `queue_empty` is called under the budget's lock.
  bool wait_for_batch(std::int64_t bytes, const std::function<bool()>& queue_empty);
  // Trainer: a queued batch of `bytes` was taken.
  void batch_taken(std::int64_t bytes);
  // Wakes every waiter; admit() and wait_for_batch() return false from now on.
  void stop();
  // A new window (at least 1); the reader is woken when it grows.
  void set_window(std::size_t window);

  std::int64_t held_bytes() const { return held_.load(); }
  std::size_t window() const { return window_.load(); }
  // The window is what stops the reader now (not the bytes): as many samples admitted as it allows.
  bool window_full();

 private:
  bool room_for_sample() const;  // under mu_
  void wake();

  const std::int64_t max_bytes_;
  std::atomic<std::size_t> window_;  // written under mu_
  const std::int64_t first_admits_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;                             // guarded by mu_
  std::size_t admitted_ = 0;                         // admitted, not yet taken by the batcher; guarded by mu_
  std::atomic<std::int64_t> held_{0};                // bytes held by samples and queued batches
  std::atomic<std::int64_t> unprocessed_{0};         // admitted, not yet processed
  std::atomic<std::int64_t> sample_bytes_total_{0};  // bytes held by processed samples, summed
  std::atomic<std::int64_t> samples_measured_{0};
};

// The samples the reader keeps ahead at a prefetch depth of `batches`: the prefetched batches'
// samples, two more batches' and two per worker (at least 16): what the pool is working on and
// what is being fetched for it.
std::size_t sample_window(const DriveOptions& options, std::size_t batches);
// The window at `depth`: its batches' window and its fetch allowance.
std::size_t sample_window(const DriveOptions& options, const PrefetchDepth& depth);

// The loader's budget: max_buffered_bytes; the window at the first prefetch depth; before any
// estimate, one batch or two samples per worker.
std::unique_ptr<MemoryBudget> memory_budget_for(const DriveOptions& options);

}  // namespace mmfeed::pipeline
