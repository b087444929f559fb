#include "pipeline/error_budget.h"

#include <string>

#include "storage/redact.h"

namespace mmfeed::pipeline {

namespace {

// Below this many samples a fraction says little: checked only at the end of the run.
constexpr std::uint64_t kMinSamplesForFraction = 20;

}  // namespace

ErrorBudget::ErrorBudget(bool fail_on_error, double max_error_fraction, core::MetricsRegistry& metrics)
    : fail_on_error_(fail_on_error),
      max_error_fraction_(max_error_fraction),
      seen_(&metrics.counter("loader.samples")),
      skipped_(&metrics.counter("loader.samples_skipped")) {}

Status ErrorBudget::count(const std::optional<SampleError>& error) {
  seen_->add();
  return error ? fail(*error) : ok_status();
}

Status ErrorBudget::fail(const SampleError& failed) {
  // Every reason passes here on its way to errors(), the run's error and the reports made from
  // them; it may quote a URL from anywhere (libcurl's text, a manifest string), so its
  // credentials are redacted here once more.
  SampleError error = failed;
  error.sample_id = storage::redact_uris_in(error.sample_id);
  error.reason = storage::redact_uris_in(error.reason);
  skipped_->add();
  {
    std::lock_guard lock(mu_);
    errors_.push_back(error);
  }
  if (fail_on_error_) return Error(error.code, error.stage + ": " + error.reason, "sample " + error.sample_id);
  const auto seen = static_cast<std::uint64_t>(seen_->value());
  const auto skipped = static_cast<std::uint64_t>(skipped_->value());
  if (seen >= kMinSamplesForFraction &&
      static_cast<double>(skipped) / static_cast<double>(seen) > max_error_fraction_) {
    return over_budget(skipped, seen, error);
  }
  return ok_status();
}

Status ErrorBudget::at_end() const {
  const auto seen = static_cast<std::uint64_t>(seen_->value());
  const auto skipped = static_cast<std::uint64_t>(skipped_->value());
  if (skipped == 0) return ok_status();
  std::lock_guard lock(mu_);
  const SampleError& last = errors_.back();
  if (skipped == seen) {
    return Error(ErrorCode::kResourceExhausted, "every sample failed (" + std::to_string(seen) + " of " +
                                                    std::to_string(seen) + "); last: " + last.sample_id + ": " +
                                                    last.stage + ": " + last.reason);
  }
  if (static_cast<double>(skipped) / static_cast<double>(seen) > max_error_fraction_) {
    return over_budget(skipped, seen, last);
  }
  return ok_status();
}

std::vector<SampleError> ErrorBudget::errors() const {
  std::lock_guard lock(mu_);
  return errors_;
}

Error ErrorBudget::over_budget(std::uint64_t skipped, std::uint64_t seen, const SampleError& last) const {
  return Error(ErrorCode::kResourceExhausted, std::to_string(skipped) + " of " + std::to_string(seen) +
                                                  " samples failed, more than the error budget (" +
                                                  std::to_string(max_error_fraction_) + "); last: " + last.sample_id +
                                                  ": " + last.reason);
}

}  // namespace mmfeed::pipeline
