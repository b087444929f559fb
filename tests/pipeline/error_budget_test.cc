#include "pipeline/error_budget.h"

#include <gtest/gtest.h>

namespace mmfeed::pipeline {
namespace {

SampleError failure(const std::string& id, ErrorCode code = ErrorCode::kCorruptData) {
  return SampleError{id, "image", "JPEG truncated", code};
}

TEST(ErrorBudgetTest, FailPolicyEndsAtTheFirstFailureWithItsOwnCode) {
  core::MetricsRegistry metrics;
  ErrorBudget budget(/*fail_on_error=*/true, 0.5, metrics);
  EXPECT_TRUE(budget.count(std::nullopt).ok());
  const Status st = budget.count(failure("s1", ErrorCode::kPermissionDenied));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(st.error().to_string(), "sample s1: image: JPEG truncated");
  ASSERT_EQ(budget.errors().size(), 1u);
}

TEST(ErrorBudgetTest, TheFractionIsCheckedFromTheTwentiethSample) {
  core::MetricsRegistry metrics;
  ErrorBudget budget(false, 0.5, metrics);
  for (int i = 0; i < 19; ++i) EXPECT_TRUE(budget.count(failure(std::to_string(i))).ok()) << i;
  const Status st = budget.count(failure("s19"));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(metrics.counter("loader.samples").value(), 20);
  EXPECT_EQ(metrics.counter("loader.samples_skipped").value(), 20);
}

TEST(ErrorBudgetTest, AtTheEndASmallRunIsCheckedAndAllFailedIsAnError) {
  core::MetricsRegistry metrics;
  ErrorBudget budget(false, 0.5, metrics);
  EXPECT_TRUE(budget.at_end().ok());  // nothing seen
  EXPECT_TRUE(budget.count(std::nullopt).ok());
  EXPECT_TRUE(budget.count(failure("a")).ok());
  EXPECT_TRUE(budget.at_end().ok());  // 1 of 2: not more than half
  EXPECT_TRUE(budget.count(failure("b")).ok());
  EXPECT_EQ(budget.at_end().error().message(),
            "2 of 3 samples failed, more than the error budget (0.500000); last: b: "
            "JPEG truncated");
  core::MetricsRegistry other;
  ErrorBudget all_failed(false, 1.0, other);
  EXPECT_TRUE(all_failed.count(failure("only")).ok());
  EXPECT_EQ(all_failed.at_end().error().message(), "every sample failed (1 of 1); last: only: image: JPEG truncated");
}

TEST(ErrorBudgetTest, ALateFailureOfACountedSampleIsRecorded) {
  core::MetricsRegistry metrics;
  ErrorBudget budget(false, 0.5, metrics);
  EXPECT_TRUE(budget.count(std::nullopt).ok());
  EXPECT_TRUE(budget.count(std::nullopt).ok());
  EXPECT_TRUE(budget.fail(failure("late")).ok());  // packing: decoded after it was counted
  EXPECT_EQ(metrics.counter("loader.samples").value(), 2);
  EXPECT_EQ(budget.errors().front().sample_id, "late");
}

}  // namespace
}  // namespace mmfeed::pipeline
