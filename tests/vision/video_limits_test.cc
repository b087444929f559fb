// Issue 31: a video item's numbers (findings 4 and 9). Frame counts are sized against the frame
// limit before a frame is listed; numbers beyond the integer types are read as upstream reads
// them (Python's ints do not wrap) or refused by name, never converted with undefined behaviour.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "vision/video_processor.h"
#include "vision/video_sampling.h"

namespace mmfeed::vision {
namespace {

const VideoInfo kHd{.width = 1280, .height = 720, .frames = 300, .fps = 30.0, .duration_s = 10.0, .codec = "h264"};
const VideoInfo k4k{.width = 3840, .height = 2160, .frames = 300, .fps = 30.0, .duration_s = 10.0, .codec = "h264"};

VideoRequest nframes(double n) {
  VideoRequest r;
  r.sampling.nframes = n;
  return r;
}

TEST(VideoLimitsTest, Qwen3NframesAboveTheFrameLimitIsRefusedNamingIt) {
  const auto r = plan_video(video_profile("qwen3-vl").value(), kHd, nframes(2'000'000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message().find("nframes 2000000"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find(std::to_string(VideoLimits{}.max_frames)), std::string::npos)
      << r.error().message();
}

TEST(VideoLimitsTest, Qwen3NframesAboveTheVideosFramesRepeatFramesAsUpstream) {
  const VideoPlan plan = plan_video(video_profile("qwen3-vl").value(), kHd, nframes(600)).value();
  ASSERT_EQ(plan.indices.size(), 600u);
  EXPECT_EQ(plan.indices[0], plan.indices[1]);  // linspace(0, 299, 600) steps by half a frame
  EXPECT_EQ(plan.indices.back(), 299);
}

// The size of this process's address space, from /proc (bytes).
std::uint64_t address_space_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// nframes 1e9 committed ~19 GB (the indices, a padded copy, the timestamps) before anything
// refused it. With 1 GiB of address space to spare it is refused, not thrown out as bad_alloc.
TEST(VideoLimitsTest, Qwen3NframesOfABillionIsRefusedWithinAGibibyte) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve address space of their own";
#endif
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  rlimit bounded = saved;
  bounded.rlim_cur = address_space_bytes() + (std::uint64_t{1} << 30);
  if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < bounded.rlim_cur) bounded.rlim_cur = saved.rlim_cur;
  ASSERT_EQ(setrlimit(RLIMIT_AS, &bounded), 0);
  bool refused = false;
  std::string message;
  try {
    const auto r = plan_video(video_profile("qwen3-vl").value(), kHd, nframes(1e9));
    refused = !r.ok() && r.error().code() == ErrorCode::kResourceExhausted;
    if (!r.ok()) message = r.error().message();
  } catch (const std::bad_alloc&) {
    message = "bad_alloc";
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
  EXPECT_TRUE(refused) << message;
}

// Issue 31, finding 9: 2^63 wrapped to -9223372036854775808 in the message.
TEST(VideoLimitsTest, NframesOutOfRangeIsReportedAsGiven) {
  const auto r = plan_video(video_profile("qwen2.5-vl").value(), kHd, nframes(9223372036854775808.0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("9223372036854775808"), std::string::npos) << r.error().message();
  EXPECT_EQ(r.error().message().find("-9223372036854775808"), std::string::npos) << r.error().message();
}

// Issue 31, finding 9: a max_pixels past 2^63, a user's "no limit", wrapped to the smallest
// frames. As upstream (Python's unbounded ints) it bounds nothing.
TEST(VideoLimitsTest, Qwen3MaxPixelsPastTheIntegersIsNoLimit) {
  const VideoProfile q3 = video_profile("qwen3-vl").value();
  VideoRequest huge, large;
  huge.max_pixels = 1e20;
  large.max_pixels = 1e15;  // already more than the clip holds
  const VideoPlan unbounded = plan_video(q3, k4k, huge).value();
  const VideoPlan reference = plan_video(q3, k4k, large).value();
  EXPECT_EQ(unbounded.size.width, reference.size.width);
  EXPECT_EQ(unbounded.size.height, reference.size.height);
  EXPECT_EQ(unbounded.size.width, 3840);
}

// Issue 31, finding 9: a min_pixels past the integers would upscale each frame past any size a
// frame may have; refused naming it (as a max_pixels below min_pixels is).
TEST(VideoLimitsTest, MinPixelsPastAFramesLimitIsRefusedByName) {
  for (const char* model : {"qwen3-vl", "qwen2.5-vl"}) {
    VideoRequest r;
    r.min_pixels = 1e20;
    const auto plan = plan_video(video_profile(model).value(), kHd, r);
    ASSERT_FALSE(plan.ok()) << model;
    EXPECT_NE(plan.error().message().find("min_pixels"), std::string::npos) << model << ": " << plan.error().message();
  }
}

// Issue 31, finding 9: frame bounds past the integers wrapped; upstream compares them as they are.
TEST(VideoLimitsTest, FrameBoundsPastTheIntegersClampAsUpstream) {
  VideoRequest most;
  most.sampling.min_frames = 1e30;  // min(max(20, 1e30), max_frames, frames in range)
  EXPECT_EQ(plan_video(video_profile("qwen3-vl").value(), kHd, most).value().indices.size(), 300u);
  EXPECT_EQ(plan_video(video_profile("qwen2.5-vl").value(), kHd, most).value().indices.size(), 300u);
  VideoRequest unbounded;
  unbounded.sampling.max_frames = 1e30;
  EXPECT_EQ(plan_video(video_profile("qwen3-vl").value(), kHd, unbounded).value().indices.size(), 20u);
}

TEST(VideoLimitsTest, Qwen3FrameBoundsThatLeaveNoFramesAreRefusedByName) {
  VideoRequest none;
  none.sampling.max_frames = -5;
  const auto r = plan_video(video_profile("qwen3-vl").value(), kHd, none);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("max_frames -5"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace mmfeed::vision
