// A driver runs the stages in some threading and hands batches to the trainer: SerialDriver
// (serial_driver.h: everything on the caller's thread, one sample after another) or
// ConcurrentDriver (concurrent_driver.h: reader, collector, CPU pool and batcher threads). Both
// run the same stages, which the Loader owns and hands over in `Stages`, and account samples
// the same way (account(), end_of_run()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/trace.h"
#include "mmfeed/error.h"
#include "mmfeed/loader.h"
#include "pipeline/batch_builder.h"
#include "pipeline/config.h"
#include "pipeline/error_budget.h"
#include "pipeline/memory_budget.h"
#include "pipeline/order.h"
#include "pipeline/progress.h"
#include "pipeline/sample_processor.h"
#include "pipeline/walk.h"
#include "storage/fetcher.h"

namespace mmfeed::pipeline {

// The stages, owned by the Loader, which outlives its driver.
struct Stages {
  const Settings& settings;
  Population population;  // the manifests' samples, as the run draws them
  LoaderState start;      // where the run started
  const SampleProcessor& processor;
  BatchBuilder& builder;
  ErrorBudget& errors;
  storage::Fetcher& fetcher;
  MemoryBudget* memory;  // null in the serial mode
  core::MetricsRegistry& metrics;
  core::TraceWriter* trace;
};

class Driver {
 public:
  explicit Driver(Stages stages);
  virtual ~Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // The next batch; nullopt at the end of the data (or once stopped). With a `timeout`, nullopt
  // and `*timed_out` when none came in time. Called by the trainer, one call at a time.
  virtual Result<std::optional<Batch>> next(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) = 0;
  // Stops the driver's threads (waits for them); next() returns nullopt from now on. Any thread.
  virtual void stop() = 0;

  // Every epoch was delivered, or the run failed: the end was not a stop().
  bool ended() const { return ended_.load(); }

 protected:
  // A finished sample: counted, a failure recorded, the error policy applied. Accounting thread.
  Status account(const Work& w);
  // The data is over: the end-of-run checks. Accounting thread.
  Status end_of_run();

  const Stages s_;
  const DriveOptions& options_;

 private:
  std::atomic<bool> ended_{false};
  // Duplicate sample ids make errors() and sample_ids ambiguous: counted over this rank's first
  // epoch (8 bytes a sample until it ends) as loader.duplicate_sample_ids. Accounting thread only.
  void count_duplicate_ids();
  std::vector<std::size_t> id_hashes_;
  core::Counter& duplicate_ids_;
  std::vector<core::Counter*> per_source_;  // a blend's loader.source<i>.samples; else empty
};

}  // namespace mmfeed::pipeline
