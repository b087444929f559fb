// The concurrent driver's life: its threads started and stopped, a stage's failure, a finished
// sample handed on. Its stages are in reader.cc, collector.cc, batcher.cc and hand_over.cc.
#include "pipeline/concurrent_driver.h"

#include <algorithm>
#include <new>

#include "core/thread_pool.h"

namespace mmfeed::pipeline {

ConcurrentDriver::ConcurrentDriver(Stages stages)
    : Driver(std::move(stages)),
      memory_(*s_.memory),
      depth_(options_.prefetch_batches, options_.batch_size),
      out_(depth_.batches()),
      buffered_gauge_(s_.metrics.gauge("loader.buffered_bytes")),
      prefetched_gauge_(s_.metrics.gauge("loader.prefetched_batches")),
      depth_gauge_(s_.metrics.gauge("loader.prefetch_depth")),
      window_gauge_(s_.metrics.gauge("loader.sample_window")) {
  depth_gauge_.set(static_cast<std::int64_t>(depth_.batches()));
  window_gauge_.set(static_cast<std::int64_t>(memory_.window()));
}

void ConcurrentDriver::start() {
  // The pool's queue holds the widest window the depth and its allowance may grow to.
  const std::size_t widest =
      sample_window(options_, depth_.automatic() ? PrefetchDepth::kMostAutomatic : depth_.batches()) +
      depth_.most_extra_samples();
  cpu_ = std::make_unique<core::ThreadPool>("process", static_cast<std::size_t>(options_.workers), widest + 16);
  reader_ = std::thread([this] { guarded("read", [this] { run_reader(); }); });
  collector_ = std::thread([this] { guarded("collect", [this] { run_collector(); }); });
  batcher_ = std::thread([this] { guarded("batch", [this] { run_batcher(); }); });
}

void ConcurrentDriver::stop() {
  if (stop_.exchange(true)) return;
  s_.fetcher.cancel();
  { std::lock_guard lock(ready_mu_); }  // the batcher is either before its check or asleep
  ready_cv_.notify_all();
  memory_.stop();
  (void)out_.cancel();
  for (std::thread* t : {&reader_, &collector_, &batcher_}) {
    if (t->joinable()) t->join();
  }
  if (cpu_) cpu_->shutdown();
}

void ConcurrentDriver::fail(Error error) {
  {
    std::lock_guard lock(fail_mu_);
    failure_ = std::move(error);
  }
  out_.close();
}

void ConcurrentDriver::guarded(const char* stage, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    fail(Error(ErrorCode::kResourceExhausted,
               std::string("the ") + stage + " stage ran out of memory; lower the sizes the run holds"));
  }
}

void ConcurrentDriver::finish(std::unique_ptr<Work> w) {
  memory_.processed(*w);
  {
    std::lock_guard lock(ready_mu_);
    ready_[order_key(w->epoch, w->seq)] = std::move(w);
  }
  ready_cv_.notify_all();
}

}  // namespace mmfeed::pipeline
