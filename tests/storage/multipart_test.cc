#include "storage/multipart.h"

#include <gtest/gtest.h>

#include <string>

namespace mmfeed::storage {
namespace {

ResponseHeaders answer(long status, std::uint64_t content_length, std::uint64_t range_total = kUnknown) {
  ResponseHeaders h;
  h.status = status;
  h.content_length = content_length;
  h.range_total = range_total;
  return h;
}

TEST(MultipartTest, TheProbeAsksForOnePart) {
  const AskedRange r = probe_range(1000);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, 999u);
}

TEST(MultipartTest, PartsCoverTheObjectAndOnlyTheLastIsShorter) {
  ASSERT_EQ(part_count(2500, 1000), 3u);
  EXPECT_EQ(part_range(0, 1000, 2500).begin, 0u);
  EXPECT_EQ(part_range(1, 1000, 2500).begin, 1000u);
  EXPECT_EQ(part_range(1, 1000, 2500).end, 1999u);
  EXPECT_EQ(part_range(2, 1000, 2500).begin, 2000u);
  EXPECT_EQ(part_range(2, 1000, 2500).end, 2499u);
}

TEST(MultipartTest, AnObjectOfWholePartsHasNoEmptyLastPart) {
  EXPECT_EQ(part_count(3000, 1000), 3u);
  EXPECT_EQ(part_range(2, 1000, 3000).end, 2999u);
}

TEST(MultipartTest, ARequestedRangeEndsAtItsLastByte) {
  const AskedRange r = requested_range(ByteRange{10, 20});
  EXPECT_EQ(r.begin, 10u);
  EXPECT_EQ(r.end, 29u);
}

TEST(MultipartTest, ARequestedRangeOfNoBytesAsksForOne) {
  const AskedRange r = requested_range(ByteRange{10, 0});
  EXPECT_EQ(r.end, 10u);
}

TEST(MultipartTest, TheRangeHeaderNamesBothEnds) { EXPECT_EQ(range_header(AskedRange{2000, 2499}), "bytes=2000-2499"); }

TEST(MultipartTest, AProbeThatRevealsALargerObjectPlansParts) {
  const BodyPlan plan = plan_body(answer(206, 1000, 2500), true, 1000);
  EXPECT_EQ(plan.kind, BodyPlan::Kind::kParts);
  EXPECT_EQ(plan.bytes, 2500u);
  EXPECT_EQ(plan.parts, 3u);
  EXPECT_EQ(std::string(plan.declared_by), "Content-Range total");
}

TEST(MultipartTest, AProbeOfAnObjectThatFitsOnePartIsWhole) {
  const BodyPlan plan = plan_body(answer(206, 700, 700), true, 1000);
  EXPECT_EQ(plan.kind, BodyPlan::Kind::kWhole);
  EXPECT_EQ(plan.bytes, 700u);
  EXPECT_EQ(std::string(plan.declared_by), "Content-Length");
}

TEST(MultipartTest, ARequestedRangeIsNeverCutInParts) {
  EXPECT_EQ(plan_body(answer(206, 1000, 2500), false, 1000).kind, BodyPlan::Kind::kWhole);
}

TEST(MultipartTest, ABodyWithoutALengthGrows) {
  const BodyPlan plan = plan_body(answer(200, kUnknown), true, 1000);
  EXPECT_EQ(plan.kind, BodyPlan::Kind::kGrow);
  EXPECT_EQ(plan.bytes, 0u);
}

}  // namespace
}  // namespace mmfeed::storage
