#include "vision/profile.h"

#include <gtest/gtest.h>

namespace mmfeed::vision {
namespace {

TEST(SmartResizeTest, SpecExamples) {
  const ModelProfile q2 = model_profile("qwen2-vl").value();
  const ModelProfile q3 = model_profile("qwen3-vl").value();
  const Size a = smart_resize(768, 1024, q2).value();
  EXPECT_EQ(a.height, 756);
  EXPECT_EQ(a.width, 1036);
  EXPECT_EQ(grid_for(a, q2).rows(), 3996);
  EXPECT_EQ(grid_for(a, q2).tokens(q2.merge_size), 999);
  const Size b = smart_resize(768, 1024, q3).value();
  EXPECT_EQ(b.height, 768);
  EXPECT_EQ(b.width, 1024);
  EXPECT_EQ(grid_for(b, q3).tokens(q3.merge_size), 768);
}

TEST(SmartResizeTest, RoundsHalfToEven) {
  // 42 / 28 = 1.5 -> 2 (even), 70 / 28 = 2.5 -> 2 (even): Python's round, not away from zero.
  const Size s = smart_resize(42, 70, 28, 0, 1 << 30).value();
  EXPECT_EQ(s.height, 56);
  EXPECT_EQ(s.width, 56);
}

TEST(SmartResizeTest, ShrinksAboveMaxPixelsAndGrowsBelowMin) {
  const Size big = smart_resize(3000, 4000, 28, 3136, 1003520).value();
  EXPECT_LE(static_cast<std::int64_t>(big.height) * big.width, 1003520);
  EXPECT_EQ(big.height % 28, 0);
  EXPECT_EQ(big.width % 28, 0);
  const Size tiny = smart_resize(1, 1, 28, 3136, 1003520).value();
  EXPECT_EQ(tiny.height, 56);
  EXPECT_EQ(tiny.width, 56);
}

TEST(SmartResizeTest, AspectRatioOver200IsAnError) {
  EXPECT_TRUE(smart_resize(2, 400, 28, 3136, 1003520).ok());
  auto r = smart_resize(2, 402, 28, 3136, 1003520);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("absolute aspect ratio must be smaller than 200"), std::string::npos);
  EXPECT_FALSE(smart_resize(0, 10, 28, 3136, 1003520).ok());
}

TEST(ModelProfileTest, KnownProfilesAndUnknownNames) {
  const ModelProfile q3 = model_profile("qwen3-vl").value();
  EXPECT_EQ(q3.row_width(), 1536);
  EXPECT_EQ(model_profile("qwen2.5-vl").value().row_width(), 1176);
  auto bad = model_profile("llava");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("known: qwen2-vl, qwen2.5-vl, qwen3-vl"), std::string::npos);
}

}  // namespace
}  // namespace mmfeed::vision
