// The concurrent driver's hand-over (the trainer's thread): the prefetch queue to the trainer,
// its depth adjusted by how long the trainer waited.
#include "pipeline/concurrent_driver.h"

namespace mmfeed::pipeline {

void ConcurrentDriver::trainer_waits() {
  // Held back: the batcher found the queue full since the trainer's previous wait. (The reader
  // finding its window full says nothing: in a loader bound by its CPUs the window is always full.)
  const std::uint64_t queue_waits = out_.stats().producer_waits;
  const bool held_back = queue_waits != seen_queue_waits_;
  seen_queue_waits_ = queue_waits;
  // Starved: the window stops the reader while the workers have nothing queued, so its samples
  // are waiting on storage.
  const bool starved = memory_.window_full() && cpu_->stats().queue.depth == 0;
  if (depth_.trainer_waited(held_back, starved)) depth_changed();
}

void ConcurrentDriver::depth_changed() {
  out_.set_capacity(depth_.batches());
  memory_.set_window(sample_window(options_, depth_));
  depth_gauge_.set(static_cast<std::int64_t>(depth_.batches()));
  window_gauge_.set(static_cast<std::int64_t>(memory_.window()));
  if (s_.trace != nullptr) s_.trace->counter("prefetch depth", static_cast<double>(depth_.batches()));
}

Result<std::optional<Batch>> ConcurrentDriver::next(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) {
  if (taken_ > 0 && !out_.closed()) {
    if (const std::size_t ready = out_.size(); ready == 0) {
      trainer_waits();
    } else if (depth_.trainer_took(ready)) {
      depth_changed();
    }
  }
  auto b = timeout ? out_.pop_for(*timeout) : out_.pop();
  if (!b && timeout && !out_.closed()) {
    *timed_out = true;
    return std::optional<Batch>();
  }
  if (b) {
    ++taken_;
    memory_.batch_taken(static_cast<std::int64_t>(b->buffer_capacity()));
    buffered_gauge_.set(memory_.held_bytes());
    prefetched_gauge_.set(static_cast<std::int64_t>(out_.size()));
    return std::optional<Batch>(std::move(*b));
  }
  std::lock_guard lock(fail_mu_);
  if (failure_) return *failure_;
  return std::optional<Batch>();
}

}  // namespace mmfeed::pipeline
