#include "storage/retry_policy.h"

#include <algorithm>

namespace mmfeed::storage {

namespace {

constexpr std::int64_t kTickNs = 50'000'000;  // deadlines and hedges are checked at least this often

}  // namespace

RetryPolicy::RetryPolicy(const FetchOptions& options)
    : max_attempts_(options.max_attempts),
      backoff_base_ms_(options.backoff_base_ms),
      backoff_max_ms_(options.backoff_max_ms),
      first_byte_timeout_ms_(options.first_byte_timeout_ms),
      stall_timeout_ms_(options.stall_timeout_ms),
      hedge_quantile_(options.hedge_quantile),
      hedge_min_ms_(options.hedge_min_ms) {}

bool RetryPolicy::should_retry(ErrorCode code, int failures) const {
  return is_retryable(code) && failures < max_attempts_;
}

std::int64_t RetryPolicy::backoff_cap_ns(int failures) const {
  const std::int64_t cap_ms = std::min<std::int64_t>(backoff_max_ms_, static_cast<std::int64_t>(backoff_base_ms_)
                                                                          << std::min(failures - 1, 20));
  return std::max<std::int64_t>(0, cap_ms) * 1'000'000;
}

std::int64_t RetryPolicy::backoff_ns(int failures, std::mt19937_64& rng) const {
  std::uniform_int_distribution<std::int64_t> jitter(0, backoff_cap_ns(failures));
  return jitter(rng);
}

int RetryPolicy::poll_wait_ms(std::optional<std::int64_t> next_retry_due_ns, std::int64_t now) const {
  std::int64_t wait_ns = kTickNs;
  if (next_retry_due_ns) wait_ns = std::min(wait_ns, *next_retry_due_ns - now);
  return static_cast<int>(std::clamp<std::int64_t>(wait_ns / 1'000'000, 0, kTickNs / 1'000'000));
}

std::optional<std::string> RetryPolicy::missed_deadline(const TransferTimes& t, std::uint64_t received,
                                                        std::int64_t now) const {
  const std::int64_t first_byte_ns = static_cast<std::int64_t>(first_byte_timeout_ms_) * 1'000'000;
  const std::int64_t stall_ns = static_cast<std::int64_t>(stall_timeout_ms_) * 1'000'000;
  if (t.first_byte_ns == 0 && now - t.start_ns > first_byte_ns) {
    return "no response within the first-byte deadline of " + std::to_string(first_byte_timeout_ms_) + " ms";
  }
  if (t.first_byte_ns != 0 && now - t.last_byte_ns > stall_ns) {
    return "stalled: no data for " + std::to_string(stall_timeout_ms_) + " ms after " + std::to_string(received) +
           " bytes";
  }
  return std::nullopt;
}

std::int64_t RetryPolicy::hedge_after_ns(const core::Histogram& latencies) const {
  if (hedge_quantile_ <= 0) return -1;
  const auto snap = latencies.snapshot();
  if (snap.count < 20) return -1;
  return std::max<std::int64_t>(static_cast<std::int64_t>(snap.percentile(hedge_quantile_)),
                                static_cast<std::int64_t>(hedge_min_ms_) * 1'000'000);
}

bool RetryPolicy::hedge_due(std::int64_t hedge_after_ns, std::int64_t start_ns, std::int64_t now) {
  return hedge_after_ns > 0 && now - start_ns > hedge_after_ns;
}

Error final_error(const Error& error, const AttemptCount& count) {
  std::string message = error.message();
  if (count.part >= 0 && count.parts > 1) {  // the part's own count, then all GETs
    message += " (part " + std::to_string(count.part) + " of " + std::to_string(count.parts) + ", after " +
               std::to_string(count.part_failures) + " attempts of it; " + std::to_string(count.attempts) +
               " requests in all)";
  } else if (count.attempts > 1) {
    message += " (after " + std::to_string(count.attempts) + " attempts)";
  }
  return Error(error.code(), std::move(message), error.context());
}

}  // namespace mmfeed::storage
