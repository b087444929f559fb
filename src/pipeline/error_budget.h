// The error budget: every finished sample is counted here, every failed one recorded with its
// stage, reason and error code, and the policy applied — on_error "fail" ends the run at the
// first failure with that sample's own code (a 403 stays a permission error); "skip" ends it once
// more than max_error_fraction of the samples seen failed, checked from the 20th sample on and
// once more at the end of the run, where a run whose every sample failed is an error at any size.
//
// Thread safety: count() and fail() are called by the one thread that accounts samples (the
// batcher, or the caller in the serial mode); errors() from any thread.
//
// Example:
//   ErrorBudget budget(/*fail_on_error=*/false, 0.5, metrics);
//   MMFEED_RETURN_IF_ERROR(budget.count(sample.error));   // each sample, once
//   ...
//   MMFEED_RETURN_IF_ERROR(budget.at_end());
#pragma once

#include <mutex>
#include <optional>
#include <vector>

#include "core/metrics.h"
#include "mmfeed/error.h"
#include "mmfeed/loader.h"

namespace mmfeed::pipeline {

class ErrorBudget {
 public:
  // Counts into loader.samples and loader.samples_skipped of `metrics` (which must outlive it).
  ErrorBudget(bool fail_on_error, double max_error_fraction, core::MetricsRegistry& metrics);

  // A sample finished: counted, and when it failed, recorded and checked.
  Status count(const std::optional<SampleError>& error);
  // A sample counted before that failed afterwards (packing decodes its images after planning).
  // The error is recorded with the URLs in its id and reason redacted (storage/redact.h).
  Status fail(const SampleError& failed);
  // The end-of-run check: the fraction whatever the count, and every sample failed.
  Status at_end() const;

  std::vector<SampleError> errors() const;

 private:
  Error over_budget(std::uint64_t skipped, std::uint64_t seen, const SampleError& last) const;

  const bool fail_on_error_;
  const double max_error_fraction_;
  core::Counter* seen_;
  core::Counter* skipped_;
  mutable std::mutex mu_;
  std::vector<SampleError> errors_;  // guarded by mu_
};

}  // namespace mmfeed::pipeline
