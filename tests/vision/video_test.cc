// The video decoder's limits, the sampling's edges and the video processor's plans and output
// shape (tests/python/video/test_video.py compares the decoded frames with PyAV's and the sampling with
// qwen-vl-utils'; test_video_processor.py the processors' output with transformers'). The clip is made with the
// ffmpeg command, which scripts/setup.sh installs.
#include "vision/video.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "vision/video_processor.h"
#include "vision/video_sampling.h"

namespace mmfeed::vision {
namespace {

class VideoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!video_supported()) GTEST_SKIP() << "built without video";
    clip_ = new std::vector<std::byte>(make_clip(""));
    // The index (moov) in front, as streaming services write MP4s: a cut copy still opens.
    faststart_ = new std::vector<std::byte>(make_clip("-movflags +faststart "));
  }
  static std::vector<std::byte> make_clip(const std::string& options) {
    const auto path = std::filesystem::temp_directory_path() / ("mmfeed-video-" + std::to_string(getpid()) + ".mp4");
    const std::string command =
        "ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=96x64:rate=30:duration=1 "
        "-c:v libx264 -pix_fmt yuv420p " +
        options + path.string();
    EXPECT_EQ(std::system(command.c_str()), 0) << "the ffmpeg command (scripts/setup.sh installs it)";
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::filesystem::remove(path);
    return {reinterpret_cast<const std::byte*>(text.data()),
            reinterpret_cast<const std::byte*>(text.data()) + text.size()};
  }
  static void TearDownTestSuite() {
    delete clip_;
    delete faststart_;
    clip_ = faststart_ = nullptr;
  }
  void SetUp() override {
    if (!video_supported()) GTEST_SKIP() << "built without video";
  }
  static inline std::vector<std::byte>* clip_ = nullptr;
  static inline std::vector<std::byte>* faststart_ = nullptr;
};

TEST_F(VideoTest, ProbesTheClip) {
  const VideoInfo info = probe_video(*clip_, {}).value();
  EXPECT_EQ(info.width, 96);
  EXPECT_EQ(info.height, 64);
  EXPECT_EQ(info.frames, 30);
  EXPECT_DOUBLE_EQ(info.fps, 30.0);
  EXPECT_EQ(info.codec, "h264");
}

TEST_F(VideoTest, EverySizeFromTheFileIsCheckedBeforeMemoryIsCommitted) {
  VideoLimits small;
  small.max_frame_pixels = 96 * 64 - 1;
  auto probed = probe_video(*clip_, small);
  ASSERT_FALSE(probed.ok());
  EXPECT_EQ(probed.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(probed.error().message().find("frames of 96x64 exceed the limit of 6143 pixels"), std::string::npos)
      << probed.error().message();
  EXPECT_EQ(decode_video_frames(*clip_, std::vector<std::int64_t>{0}, small).error().code(),
            ErrorCode::kResourceExhausted);

  VideoLimits bytes;
  bytes.max_decoded_bytes = 96 * 64 * 3 * 2;  // two frames' RGB
  EXPECT_TRUE(decode_video_frames(*clip_, std::vector<std::int64_t>{0, 9}, bytes).ok());
  auto three = decode_video_frames(*clip_, std::vector<std::int64_t>{0, 9, 19}, bytes);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.error().message().find("3 frames of 96x64 need 55296 bytes, over the limit of 36864"),
            std::string::npos)
      << three.error().message();

  VideoLimits frames;
  frames.max_frames = 29;
  auto many = probe_video(*clip_, frames);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.error().message().find("more than 29 frames"), std::string::npos) << many.error().message();
}

TEST_F(VideoTest, EmptyOrCutInputIsAnErrorNotACrash) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{64}, clip_->size() / 3}) {
    const std::span<const std::byte> cut(clip_->data(), size);
    auto probed = probe_video(cut, {});
    auto decoded = decode_video_frames(cut, std::vector<std::int64_t>{29}, {});
    EXPECT_FALSE(probed.ok() && decoded.ok()) << size << " bytes";
  }
}

TEST_F(VideoTest, AClipCutShortOfTheFramesItsIndexDeclaresIsRefused) {
  ASSERT_TRUE(probe_video(*faststart_, {}).ok());
  const std::span<const std::byte> cut(faststart_->data(), faststart_->size() * 3 / 5);
  auto probed = probe_video(cut, {});
  ASSERT_FALSE(probed.ok());
  EXPECT_EQ(probed.error().code(), ErrorCode::kCorruptData);
  EXPECT_NE(probed.error().message().find("truncated: the container declares 30 frames, the file holds "),
            std::string::npos)
      << probed.error().message();
  EXPECT_EQ(decode_video_frames(cut, std::vector<std::int64_t>{0}, {}).error().code(), ErrorCode::kCorruptData);
}

TEST_F(VideoTest, TheHeaderAloneGivesTheFactsFromEitherEndOfTheFile) {
  // moov at the end (ffmpeg's default; the file in two parts, read across their seam), then in
  // front (faststart; its last third, packets, never at hand): the header gives the probe's facts.
  // (tests/python/data/test_index.py reads remote videos with a gap of MiBs between the parts.)
  for (const std::vector<std::byte>* clip : {clip_, faststart_}) {
    const std::span<const std::byte> all(*clip);
    const std::size_t third = all.size() / 3;
    const bool moov_first = clip == faststart_;
    const auto head = all.first(moov_first ? all.size() - third : third);
    const auto tail = moov_first ? std::span<const std::byte>() : all.last(all.size() - third);
    SCOPED_TRACE(moov_first ? "moov first" : "moov last");
    auto probed = probe_video_header(head, tail, all.size(), {});
    ASSERT_TRUE(probed.ok()) << probed.error().to_string();
    const VideoInfo& info = *probed;
    EXPECT_EQ(info.width, 96);
    EXPECT_EQ(info.height, 64);
    EXPECT_EQ(info.frames, 30);
    EXPECT_DOUBLE_EQ(info.fps, 30.0);
    EXPECT_DOUBLE_EQ(info.duration_s, 1.0);
  }
  // Neither end holding the header: an error, no read past what is at hand.
  const std::span<const std::byte> all(*clip_);
  auto missing = probe_video_header(all.first(all.size() / 3), all.last(16), all.size(), {});
  EXPECT_FALSE(missing.ok());
  VideoLimits small;
  small.max_frame_pixels = 96 * 64 - 1;
  EXPECT_EQ(probe_video_header(*faststart_, {}, faststart_->size(), small).error().code(),
            ErrorCode::kResourceExhausted);
}

TEST(VideoSamplingTest, TheRecipesEdges) {
  // Defaults: 2 frames per second, at least 4, even counts.
  EXPECT_EQ(plan_qwen2_video_frames({}, 300, 30.0).value().indices.size(), 20u);
  EXPECT_EQ(plan_qwen2_video_frames({}, 30, 30.0).value().indices.size(), 4u);  // 2 by rate, 4 at least
  VideoSamplingRequest odd;
  odd.nframes = 7;  // rounded to an even count: round(3.5) * 2 = 8 (half to even)
  EXPECT_EQ(plan_qwen2_video_frames(odd, 300, 30.0).value().indices.size(), 8u);
  VideoSamplingRequest too_many;
  too_many.nframes = 40;
  EXPECT_EQ(plan_qwen2_video_frames(too_many, 30, 30.0).error().code(), ErrorCode::kInvalidArgument);
  VideoSamplingRequest backwards;
  backwards.video_start = 5.0;
  backwards.video_end = 2.0;
  const auto refused = plan_qwen2_video_frames(backwards, 300, 30.0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("holds no frames"), std::string::npos) << refused.error().message();
  EXPECT_EQ(linspace_rounded(0, 9, 3), (std::vector<std::int64_t>{0, 4, 9}));  // 4.5 rounds to even
}

TEST(VideoSamplingTest, Qwen3SamplesAsNumpysLinspace) {
  // int(300 / 30 * 2) = 20 frames over 0 .. 299: i * 299 / 19 rounded half to even.
  const auto twenty = plan_qwen3_video_frames(std::nullopt, 2.0, 4, 768, 300, 30.0).value();
  ASSERT_EQ(twenty.size(), 20u);
  EXPECT_EQ(twenty.front(), 0);
  EXPECT_EQ(twenty[1], 16);  // 15.74
  EXPECT_EQ(twenty.back(), 299);
  // Fewer frames than the minimum: all of them; one frame: [0].
  EXPECT_EQ(plan_qwen3_video_frames(std::nullopt, 2.0, 4, 768, 3, 30.0).value(), (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(plan_qwen3_video_frames(std::nullopt, 2.0, 4, 768, 1, 30.0).value(), (std::vector<std::int64_t>{0}));
  // nframes is taken as given, repeats included (linspace(0, 2, 5) = 0, .5, 1, 1.5, 2 -> 0, 0, 1, 2, 2).
  EXPECT_EQ(plan_qwen3_video_frames(5.0, 2.0, 4, 768, 3, 30.0).value(), (std::vector<std::int64_t>{0, 0, 1, 2, 2}));
  EXPECT_EQ(plan_qwen3_video_frames(0.0, 2.0, 4, 768, 3, 30.0).error().code(), ErrorCode::kInvalidArgument);
}

TEST(VideoProcessorTest, PlansFollowEachRecipe) {
  const VideoInfo hd{.width = 1280, .height = 720, .frames = 300, .fps = 30.0, .duration_s = 10.0, .codec = "h264"};
  // Qwen2.5-VL: 20 frames; the per-frame budget min(768 x 28^2, 0.9 x 128000 x 28^2 / 20 x 2).
  const VideoProfile q25 = video_profile("qwen2.5-vl").value();
  const VideoPlan a = plan_video(q25, hd, {}).value();
  EXPECT_EQ(a.indices.size(), 20u);
  EXPECT_EQ(a.grid.t, 10);
  EXPECT_LE(static_cast<std::int64_t>(a.size.height) * a.size.width, 768 * 28 * 28);
  EXPECT_DOUBLE_EQ(second_per_grid_t(q25, a), 1.0);  // 2 / (20 / 300 x 30)
  // Qwen3-VL: the clip's budget, and a timestamp per group (the mean of its two frames' times).
  const VideoProfile q3 = video_profile("qwen3-vl").value();
  const VideoPlan b = plan_video(q3, hd, {}).value();
  ASSERT_EQ(b.timestamps.size(), static_cast<std::size_t>(b.grid.t));
  EXPECT_DOUBLE_EQ(b.timestamps[0], static_cast<double>(b.indices[0] + b.indices[1]) / 2.0 / 30.0);
  EXPECT_EQ(b.size.height % 32, 0);
  // A single frame cannot fill Qwen3-VL's temporal patch; Qwen3-VL reads no video_end.
  VideoInfo one = hd;
  one.frames = 1;
  EXPECT_EQ(plan_video(q3, one, {}).error().code(), ErrorCode::kOutOfRange);
  VideoRequest ranged;
  ranged.sampling.video_end = 2.0;
  EXPECT_EQ(plan_video(q3, hd, ranged).error().code(), ErrorCode::kInvalidArgument);
  // A budget that leaves no pixels, and one the Qwen2-VL processor would resize again (28x28
  // frames, under its 3136), are refused by name.
  VideoRequest none;
  none.min_pixels = 28 * 28;
  none.max_pixels = 28 * 28;
  EXPECT_NE(plan_video(q25, hd, none).error().message().find("resize to nothing"), std::string::npos);
  VideoRequest tiny;
  tiny.min_pixels = 28 * 28;
  tiny.max_pixels = 2 * 28 * 28;
  const auto refused = plan_video(q25, hd, tiny);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("resize them a second time"), std::string::npos)
      << refused.error().message();
}

TEST_F(VideoTest, ProcessesTheClipIntoItsPlannedRows) {
  for (const char* model : {"qwen2-vl", "qwen3-vl"}) {
    const VideoProcessor proc(video_profile(model).value());
    const VideoPlan plan = proc.plan(*clip_, {}).value();
    std::vector<float> rows(static_cast<std::size_t>(plan.grid.rows()) * proc.row_elements() + 1, 7.0f);
    ASSERT_TRUE(proc.process(*clip_, plan, rows.data()).ok()) << model;
    EXPECT_EQ(rows.back(), 7.0f) << "nothing written past the last row";
    for (std::size_t i = 0; i + 1 < rows.size(); ++i)
      ASSERT_TRUE(rows[i] >= -3.0f && rows[i] <= 3.0f) << model << " " << i;
  }
}

TEST_F(VideoTest, ResizeThenWriteIsProcess) {
  const VideoProcessor proc(video_profile("qwen3-vl").value());
  VideoRequest odd;
  odd.sampling.nframes = 5;  // an odd count (Qwen3-VL keeps it): the last group repeats its frame
  const VideoPlan plan = proc.plan(*clip_, odd).value();
  ASSERT_EQ(plan.indices.size(), 5u);
  std::vector<float> whole(static_cast<std::size_t>(plan.grid.rows()) * proc.row_elements());
  ASSERT_TRUE(proc.process(*clip_, plan, whole.data()).ok());
  const ResizedVideo resized = proc.resize(*clip_, plan).value();
  EXPECT_EQ(resized.count, 5u);
  EXPECT_EQ(resized.frames.size(), resized_bytes(plan));
  std::vector<float> halves(whole.size());
  proc.write(resized, halves.data());
  EXPECT_EQ(halves, whole);
}

}  // namespace
}  // namespace mmfeed::vision
