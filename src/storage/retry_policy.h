// The retry policy of the fetch engine: how many times a GET is tried, how long it waits between
// tries (exponential backoff with full jitter), when a transfer in flight has passed its
// first-byte or stall deadline, and when a slow request is hedged with a second GET. Pure
// arithmetic over FetchOptions and times in nanoseconds (core::now_ns()); the engine
// (fetch_engine.h) asks it on its I/O thread, which owns the random generator it passes in.
//
// Example:
//   RetryPolicy policy(FetchOptions{.max_attempts = 3, .backoff_base_ms = 100});
//   policy.should_retry(ErrorCode::kUnavailable, 1);  // true: a 503, two tries left
//   policy.should_retry(ErrorCode::kNotFound, 1);     // false: a 404 is final at once
//   policy.backoff_ns(2, rng);                        // uniform in [0, 200 ms]
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include "core/metrics.h"
#include "mmfeed/error.h"
#include "storage/fetcher.h"

namespace mmfeed::storage {

// When a transfer started and saw its first and latest response bytes (headers count); 0 for
// "no byte yet".
struct TransferTimes {
  std::int64_t start_ns = 0;
  std::int64_t first_byte_ns = 0;
  std::int64_t last_byte_ns = 0;
};

// How many GETs a request that is given up took, for its final message.
struct AttemptCount {
  int part = -1;          // the part of a large object that failed; -1: the whole object
  std::size_t parts = 0;  // the object's parts (0 or 1: not fetched in parts)
  int part_failures = 0;  // failed GETs of that part
  int attempts = 0;       // GETs sent for the object in all (parts and hedges included)
};

class RetryPolicy {
 public:
  explicit RetryPolicy(const FetchOptions& options);

  // Whether a request (an object, or one part of a large object) is tried again after its
  // `failures`-th failed GET (this one counted) ended with `code`: the code is retryable
  // (is_retryable) and fewer than max_attempts GETs of it have failed.
  bool should_retry(ErrorCode code, int failures) const;

  // The longest wait before the try that follows the `failures`-th failure (failures >= 1):
  // min(backoff_max_ms, backoff_base_ms * 2^(failures-1)), in ns.
  std::int64_t backoff_cap_ns(int failures) const;

  // The wait before that try: uniform in [0, backoff_cap_ns(failures)] (full jitter), drawn from
  // `rng`, so a seeded engine waits the same on every run.
  std::int64_t backoff_ns(int failures, std::mt19937_64& rng) const;

  // How long the I/O thread may sleep at `now` in curl_multi_poll, in ms: until the earliest due
  // retry (`next_retry_due_ns`, if any), and never more than the 50 ms tick at which deadlines and
  // hedges are checked; 0 when a retry is already due.
  int poll_wait_ms(std::optional<std::int64_t> next_retry_due_ns, std::int64_t now) const;

  // Why a transfer in flight, with `received` body bytes, has passed a deadline at `now`: no
  // response byte within first_byte_timeout_ms of its start, or none for stall_timeout_ms after
  // the first. nullopt while it is within both.
  std::optional<std::string> missed_deadline(const TransferTimes& times, std::uint64_t received,
                                             std::int64_t now) const;

  // How long a request runs before it is hedged: the hedge_quantile of the object latencies seen
  // so far, and at least hedge_min_ms, in ns. -1 (never) while hedging is off or fewer than 20
  // latencies are known; `latencies` is only read when hedging is on.
  std::int64_t hedge_after_ns(const core::Histogram& latencies) const;

  // Whether a request started at `start_ns` is due a hedge at `now`, given hedge_after_ns's answer.
  static bool hedge_due(std::int64_t hedge_after_ns, std::int64_t start_ns, std::int64_t now);

 private:
  int max_attempts_;
  int backoff_base_ms_;
  int backoff_max_ms_;
  int first_byte_timeout_ms_;
  int stall_timeout_ms_;
  double hedge_quantile_;
  int hedge_min_ms_;
};

// The error a request ends with when it is not tried again: `error`'s code and context, its message
// followed by how many GETs it took -- " (after 3 attempts)", or for one part of a large object
// " (part 4 of 20, after 3 attempts of it; 27 requests in all)". A first attempt says nothing more.
Error final_error(const Error& error, const AttemptCount& count);

}  // namespace mmfeed::storage
