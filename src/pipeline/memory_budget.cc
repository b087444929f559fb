#include "pipeline/memory_budget.h"

#include <algorithm>

#include "pipeline/prefetch_depth.h"

namespace mmfeed::pipeline {

MemoryBudget::MemoryBudget(std::uint64_t max_bytes, std::size_t window, std::int64_t first_admits)
    : max_bytes_(static_cast<std::int64_t>(max_bytes)), window_(window), first_admits_(first_admits) {}

bool MemoryBudget::room_for_sample() const {
  if (admitted_ == 0) return true;  // one sample always fits: the config check bounds its pixels
  if (admitted_ >= window_) return false;
  const std::int64_t measured = samples_measured_.load();
  const std::int64_t pending = unprocessed_.load();
  if (measured == 0) return pending < first_admits_;
  const std::int64_t projected = held_.load() + (pending + 1) * (sample_bytes_total_.load() / measured);
  return projected < max_bytes_;
}

bool MemoryBudget::admit() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stopped_ || room_for_sample(); });
  if (stopped_) return false;
  ++admitted_;
  unprocessed_.fetch_add(1);
  return true;
}

void MemoryBudget::hold(Work& sample, std::int64_t delta) {
  sample.held += delta;
  held_.fetch_add(delta);
}

void MemoryBudget::processed(const Work& sample) {
  unprocessed_.fetch_sub(1);
  if (!sample.error) {
    sample_bytes_total_.fetch_add(sample.held);
    samples_measured_.fetch_add(1);
  }
  wake();
}

void MemoryBudget::leave(Work& sample) {
  held_.fetch_sub(sample.held);
  sample.held = 0;
  {
    std::lock_guard lock(mu_);
    --admitted_;
  }
  cv_.notify_all();
}

bool MemoryBudget::wait_for_batch(std::int64_t bytes, const std::function<bool()>& queue_empty) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stopped_ || queue_empty() || held_.load() + bytes <= max_bytes_; });
  if (stopped_) return false;
  held_.fetch_add(bytes);
  return true;
}

void MemoryBudget::batch_taken(std::int64_t bytes) {
  held_.fetch_sub(bytes);
  wake();
}

void MemoryBudget::set_window(std::size_t window) {
  {
    std::lock_guard lock(mu_);
    window_.store(std::max<std::size_t>(window, 1));
  }
  cv_.notify_all();
}

bool MemoryBudget::window_full() {
  std::lock_guard lock(mu_);
  return admitted_ >= window_.load();
}

void MemoryBudget::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

// The waiter is either before its check (and sees the change) or asleep (and is woken).
void MemoryBudget::wake() {
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
}

std::size_t sample_window(const DriveOptions& options, std::size_t batches) {
  const auto per_worker = static_cast<std::size_t>(2 * std::max(1, options.workers));
  return std::max<std::size_t>(options.batch_size * (batches + 2) + per_worker, 16);
}

std::size_t sample_window(const DriveOptions& options, const PrefetchDepth& depth) {
  return sample_window(options, depth.batches()) + depth.extra_samples();
}

std::unique_ptr<MemoryBudget> memory_budget_for(const DriveOptions& options) {
  const std::size_t window = sample_window(options, PrefetchDepth(options.prefetch_batches));
  const auto first =
      std::max<std::int64_t>(2 * std::max(1, options.workers), static_cast<std::int64_t>(options.batch_size));
  return std::make_unique<MemoryBudget>(options.max_buffered_bytes, window, first);
}

}  // namespace mmfeed::pipeline
