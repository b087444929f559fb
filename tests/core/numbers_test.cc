// Issue 31, finding 9: numbers from outside converted with their range checked, never wrapped.
#include "mmfeed/numbers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace mmfeed::core {
namespace {

TEST(TruncateToTest, TruncatesTowardZeroAsPythonsInt) {
  EXPECT_EQ(truncate_to<std::int64_t>(7.9), 7);
  EXPECT_EQ(truncate_to<std::int64_t>(-7.9), -7);
  EXPECT_EQ(truncate_to<std::uint32_t>(0.5), 0u);
}

TEST(TruncateToTest, RefusesWhatLiesOutsideTheType) {
  EXPECT_EQ(truncate_to<std::int64_t>(9223372036854775808.0), std::nullopt);  // 2^63
  EXPECT_EQ(truncate_to<std::int64_t>(1e20), std::nullopt);
  EXPECT_EQ(truncate_to<std::int64_t>(-1e20), std::nullopt);
  EXPECT_EQ(truncate_to<std::int64_t>(std::nan("")), std::nullopt);
  EXPECT_EQ(truncate_to<std::int64_t>(std::numeric_limits<double>::infinity()), std::nullopt);
  EXPECT_EQ(truncate_to<std::int32_t>(2147483648.0), std::nullopt);
  EXPECT_EQ(truncate_to<std::uint64_t>(-1.0), std::nullopt);
}

TEST(TruncateToTest, TakesTheTypesEdges) {
  EXPECT_EQ(truncate_to<std::int64_t>(-9223372036854775808.0), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(truncate_to<std::int64_t>(9223372036854774784.0), 9223372036854774784);  // the largest double below 2^63
  EXPECT_EQ(truncate_to<std::int32_t>(2147483647.5), 2147483647);
  EXPECT_EQ(truncate_to<std::uint64_t>(-0.5), 0u);
}

TEST(ParseNumberTest, ReadsTheWholeTextInRange) {
  EXPECT_EQ(parse_number<double>("--step-ms", "250", 0, 1e6).value(), 250.0);
  EXPECT_EQ(parse_number<double>("--step-ms", "2.5e2", 0, 1e6).value(), 250.0);
  EXPECT_EQ(parse_number<long>("--batch", "-3", -5, 5).value(), -3);
  EXPECT_EQ(parse_number<std::uint64_t>("--seed", "18446744073709551615", 0, UINT64_MAX).value(), UINT64_MAX);
}

TEST(ParseNumberTest, RefusesGarbageNamingTheFlagAndRange) {
  const auto abc = parse_number<double>("--step-ms", "abc", 0, 86'400'000);
  ASSERT_FALSE(abc.ok());
  EXPECT_EQ(abc.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(abc.error().message(), "--step-ms takes a number in 0..86400000, not 'abc'");
  for (const char* text : {"", "12ms", " 12", "+12", "0x10", "nan", "inf", "1e20", "1e999", "-1"}) {
    EXPECT_FALSE(parse_number<double>("--step-ms", text, 0, 86'400'000).ok()) << text;
  }
  for (const char* text : {"", "1.5", "1e3", "4x", "99999999999999999999", "-1"}) {
    EXPECT_FALSE(parse_number<std::size_t>("--batch-size", text, 1, 1 << 20).ok()) << text;
  }
  EXPECT_EQ(parse_number<int>("--batch", "3000000000", 0, INT32_MAX).error().message(),
            "--batch takes an integer in 0..2147483647, not '3000000000'");
}

}  // namespace
}  // namespace mmfeed::core
