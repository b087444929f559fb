#include "mmfeed/error.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace mmfeed {
namespace {

Result<int> parse_digit(char c) {
  if (c < '0' || c > '9') return Error(ErrorCode::kInvalidArgument, "not a digit", std::string(1, c));
  return c - '0';
}

Result<int> sum_digits(const std::string& s) {
  int total = 0;
  for (char c : s) {
    MMFEED_ASSIGN_OR_RETURN(int d, parse_digit(c));
    total += d;
  }
  return total;
}

Status check_even(const std::string& s) {
  MMFEED_ASSIGN_OR_RETURN(int total, sum_digits(s));
  if (total % 2 != 0) return Error(ErrorCode::kOutOfRange, "odd sum " + std::to_string(total));
  return ok_status();
}

Status check_even_twice(const std::string& s) {
  MMFEED_RETURN_IF_ERROR(check_even(s));
  MMFEED_RETURN_IF_ERROR(check_even(s + s));
  return ok_status();
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = parse_digit('7');
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(r.value_or(0), 7);
}

TEST(ResultTest, HoldsErrorWithCodeMessageAndContext) {
  Result<int> r = parse_digit('x');
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message(), "not a digit");
  EXPECT_EQ(r.error().context(), "x");
  EXPECT_EQ(r.error().to_string(), "x: not a digit");
  EXPECT_EQ(r.value_or(-1), -1);
}

TEST(ResultTest, ValueOfErrorThrowsWithTheMessage) {
  Result<int> r = parse_digit('x');
  try {
    (void)r.value();
    FAIL() << "value() of an error must throw";
  } catch (const BadResultAccess& e) {
    EXPECT_NE(std::string(e.what()).find("x: not a digit"), std::string::npos);
  }
  EXPECT_THROW((void)parse_digit('1').error(), BadResultAccess);
}

TEST(ResultTest, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*sum_digits("123"), 6);
  auto bad = sum_digits("12a3");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().context(), "a");

  EXPECT_TRUE(check_even("22").ok());
  Status odd = check_even_twice("21");
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(odd.error().message(), "odd sum 3");
}

TEST(ResultTest, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

TEST(ResultTest, ConvertsCompatibleValues) {
  Result<std::string> r = "literal";
  EXPECT_EQ(*r, "literal");
  EXPECT_EQ(r->size(), 7u);
}

TEST(ErrorTest, ContextNestsOutermostFirst) {
  Error e = Error(ErrorCode::kCorruptData, "JPEG truncated", "s3://b/k.jpg").with_context("sample 17");
  EXPECT_EQ(e.to_string(), "sample 17: s3://b/k.jpg: JPEG truncated");
  Error bare = Error(ErrorCode::kTimeout, "deadline passed").with_context("fetch");
  EXPECT_EQ(bare.to_string(), "fetch: deadline passed");
}

TEST(ErrorTest, CodeNamesAreStableAndRetryabilityIsExplicit) {
  EXPECT_EQ(error_code_name(ErrorCode::kNotFound), "not_found");
  EXPECT_EQ(error_code_name(ErrorCode::kUnavailable), "unavailable");
  EXPECT_TRUE(is_retryable(ErrorCode::kTimeout));
  EXPECT_TRUE(is_retryable(ErrorCode::kUnavailable));
  EXPECT_FALSE(is_retryable(ErrorCode::kNotFound));
  EXPECT_FALSE(is_retryable(ErrorCode::kCorruptData));
  EXPECT_FALSE(is_retryable(ErrorCode::kPermissionDenied));
}

}  // namespace
}  // namespace mmfeed
