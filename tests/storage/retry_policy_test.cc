#include "storage/retry_policy.h"

#include <gtest/gtest.h>

namespace mmfeed::storage {
namespace {

constexpr std::int64_t kMs = 1'000'000;

FetchOptions options() {
  FetchOptions o;
  o.max_attempts = 3;
  o.backoff_base_ms = 100;
  o.backoff_max_ms = 1000;
  o.first_byte_timeout_ms = 200;
  o.stall_timeout_ms = 50;
  return o;
}

TEST(RetryPolicyTest, ARetryableFailureIsTriedUntilMaxAttempts) {
  const RetryPolicy policy(options());
  EXPECT_TRUE(policy.should_retry(ErrorCode::kUnavailable, 1));
  EXPECT_TRUE(policy.should_retry(ErrorCode::kTimeout, 2));
  EXPECT_FALSE(policy.should_retry(ErrorCode::kIoError, 3));
}

TEST(RetryPolicyTest, AFinalFailureIsNotTriedAgain) {
  const RetryPolicy policy(options());
  EXPECT_FALSE(policy.should_retry(ErrorCode::kNotFound, 1));
  EXPECT_FALSE(policy.should_retry(ErrorCode::kPermissionDenied, 1));
  EXPECT_FALSE(policy.should_retry(ErrorCode::kResourceExhausted, 1));
  EXPECT_FALSE(policy.should_retry(ErrorCode::kInvalidArgument, 1));
}

TEST(RetryPolicyTest, OneAttemptAllowedMeansNoRetry) {
  FetchOptions o = options();
  o.max_attempts = 1;
  EXPECT_FALSE(RetryPolicy(o).should_retry(ErrorCode::kUnavailable, 1));
}

TEST(RetryPolicyTest, TheBackoffCapDoublesPerFailureUpToTheMaximum) {
  const RetryPolicy policy(options());
  EXPECT_EQ(policy.backoff_cap_ns(1), 100 * kMs);
  EXPECT_EQ(policy.backoff_cap_ns(2), 200 * kMs);
  EXPECT_EQ(policy.backoff_cap_ns(4), 800 * kMs);
  EXPECT_EQ(policy.backoff_cap_ns(5), 1000 * kMs);
  EXPECT_EQ(policy.backoff_cap_ns(1000), 1000 * kMs);  // the shift stops before it overflows
}

TEST(RetryPolicyTest, TheBackoffIsBoundedByItsCap) {
  const RetryPolicy policy(options());
  std::mt19937_64 rng(7);
  for (int failures = 1; failures <= 30; ++failures) {
    for (int i = 0; i < 100; ++i) {
      const std::int64_t wait = policy.backoff_ns(failures, rng);
      ASSERT_GE(wait, 0);
      ASSERT_LE(wait, policy.backoff_cap_ns(failures));
      ASSERT_LE(wait, 1000 * kMs);
    }
  }
}

TEST(RetryPolicyTest, TheBackoffIsTheSameForTheSameSeed) {
  const RetryPolicy policy(options());
  std::mt19937_64 a(42), b(42);
  for (int failures = 1; failures <= 5; ++failures)
    EXPECT_EQ(policy.backoff_ns(failures, a), policy.backoff_ns(failures, b));
}

TEST(RetryPolicyTest, ANegativeBaseWaitsNotAtAll) {
  FetchOptions o = options();
  o.backoff_base_ms = -5;
  std::mt19937_64 rng(1);
  EXPECT_EQ(RetryPolicy(o).backoff_ns(1, rng), 0);
}

TEST(RetryPolicyTest, ThePollWaitEndsWhenTheNextRetryIsDue) {
  const RetryPolicy policy(options());
  EXPECT_EQ(policy.poll_wait_ms(1000 + 20 * kMs, 1000), 20);
}

TEST(RetryPolicyTest, ThePollWaitNeverOutlastsTheDeadlineTick) {
  const RetryPolicy policy(options());
  EXPECT_EQ(policy.poll_wait_ms(std::nullopt, 0), 50);
  EXPECT_EQ(policy.poll_wait_ms(10'000 * kMs, 0), 50);
}

TEST(RetryPolicyTest, ThePollDoesNotWaitForARetryAlreadyDue) {
  const RetryPolicy policy(options());
  EXPECT_EQ(policy.poll_wait_ms(0, 5 * kMs), 0);
}

TEST(RetryPolicyTest, NoFirstByteWithinItsDeadlineIsMissed) {
  const RetryPolicy policy(options());
  const TransferTimes t{.start_ns = 1000};
  EXPECT_FALSE(policy.missed_deadline(t, 0, 1000 + 200 * kMs));
  EXPECT_EQ(policy.missed_deadline(t, 0, 1001 + 200 * kMs).value_or(""),
            "no response within the first-byte deadline of 200 ms");
}

TEST(RetryPolicyTest, NoDataForTheStallTimeAfterTheFirstByteIsAStall) {
  const RetryPolicy policy(options());
  const TransferTimes t{.start_ns = 0, .first_byte_ns = 10 * kMs, .last_byte_ns = 300 * kMs};
  EXPECT_FALSE(policy.missed_deadline(t, 4096, 350 * kMs));
  EXPECT_EQ(policy.missed_deadline(t, 4096, 351 * kMs).value_or(""), "stalled: no data for 50 ms after 4096 bytes");
}

TEST(RetryPolicyTest, ATransferStillReceivingPassesTheFirstByteDeadline) {
  const RetryPolicy policy(options());
  const TransferTimes t{.start_ns = 0, .first_byte_ns = 1, .last_byte_ns = 900 * kMs};
  EXPECT_FALSE(policy.missed_deadline(t, 1, 910 * kMs));
}

TEST(RetryPolicyTest, HedgingOffNeverHedges) {
  core::Histogram latencies;
  for (int i = 0; i < 100; ++i) latencies.record(10 * kMs);
  EXPECT_EQ(RetryPolicy(options()).hedge_after_ns(latencies), -1);
  EXPECT_FALSE(RetryPolicy::hedge_due(-1, 0, 1'000'000 * kMs));
}

TEST(RetryPolicyTest, NoHedgeBeforeTwentyLatenciesAreKnown) {
  FetchOptions o = options();
  o.hedge_quantile = 0.9;
  core::Histogram latencies;
  for (int i = 0; i < 19; ++i) latencies.record(10 * kMs);
  EXPECT_EQ(RetryPolicy(o).hedge_after_ns(latencies), -1);
  latencies.record(10 * kMs);
  EXPECT_GT(RetryPolicy(o).hedge_after_ns(latencies), 0);
}

TEST(RetryPolicyTest, AHedgeWaitsForTheQuantileButAtLeastTheMinimum) {
  FetchOptions o = options();
  o.hedge_quantile = 0.5;
  o.hedge_min_ms = 100;
  core::Histogram fast, slow;
  for (int i = 0; i < 40; ++i) {
    fast.record(1 * kMs);
    slow.record(400 * kMs);
  }
  EXPECT_EQ(RetryPolicy(o).hedge_after_ns(fast), 100 * kMs);
  const std::int64_t after = RetryPolicy(o).hedge_after_ns(slow);
  EXPECT_NEAR(static_cast<double>(after), 400.0 * kMs, 400.0 * kMs / 32);  // the histogram's resolution
}

TEST(RetryPolicyTest, ARequestIsHedgedOnlyOnceItRunsPastTheHedgeDelay) {
  EXPECT_FALSE(RetryPolicy::hedge_due(100 * kMs, 0, 100 * kMs));
  EXPECT_TRUE(RetryPolicy::hedge_due(100 * kMs, 0, 100 * kMs + 1));
}

TEST(FinalErrorTest, AFirstAttemptSaysNothingMore) {
  const Error e = final_error(Error(ErrorCode::kNotFound, "HTTP 404", "http://h/a"), {.attempts = 1});
  EXPECT_EQ(e.to_string(), "http://h/a: HTTP 404");
}

TEST(FinalErrorTest, ARetriedRequestSaysHowManyAttemptsAndKeepsItsCode) {
  const Error e = final_error(Error(ErrorCode::kUnavailable, "HTTP 503", "http://h/a"), {.attempts = 3});
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(e.context(), "http://h/a");
  EXPECT_EQ(e.message(), "HTTP 503 (after 3 attempts)");
}

TEST(FinalErrorTest, AFailedPartCountsItsOwnAttemptsThenAll) {
  const Error e = final_error(Error(ErrorCode::kIoError, "truncated part: 1 of 2 bytes", "u"),
                              {.part = 4, .parts = 20, .part_failures = 3, .attempts = 27});
  EXPECT_EQ(e.message(), "truncated part: 1 of 2 bytes (part 4 of 20, after 3 attempts of it; 27 requests in all)");
}

TEST(FinalErrorTest, AnObjectOfOnePartCountsAttemptsOnly) {
  const Error e =
      final_error(Error(ErrorCode::kIoError, "x", "u"), {.part = 0, .parts = 1, .part_failures = 2, .attempts = 2});
  EXPECT_EQ(e.message(), "x (after 2 attempts)");
}

}  // namespace
}  // namespace mmfeed::storage
