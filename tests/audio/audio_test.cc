// The audio module's rules, each against the arithmetic it reproduces (numpy's channel mean,
// librosa's crop and length rules, the Omni encoders' token counts, the extractor's padding).
// Whole clips against librosa and transformers: tests/python/audio/.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "audio/decode.h"
#include "audio/features.h"
#include "audio/log10.h"
#include "audio/profile.h"
#include "audio/resample.h"

namespace mmfeed::audio {
namespace {

// A 16-bit PCM WAV file of interleaved `samples`.
std::vector<std::byte> wav(const std::vector<std::int16_t>& samples, int channels, int rate) {
  std::vector<std::byte> out;
  const auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  };
  const auto u32 = [&](std::uint32_t v) { put(&v, 4); };
  const auto u16 = [&](std::uint16_t v) { put(&v, 2); };
  const auto data = static_cast<std::uint32_t>(samples.size() * 2);
  put("RIFF", 4);
  u32(36 + data);
  put("WAVEfmt ", 8);
  u32(16);
  u16(1);
  u16(static_cast<std::uint16_t>(channels));
  u32(static_cast<std::uint32_t>(rate));
  u32(static_cast<std::uint32_t>(rate * channels * 2));
  u16(static_cast<std::uint16_t>(channels * 2));
  u16(16);
  put("data", 4);
  u32(data);
  put(samples.data(), samples.size() * 2);
  return out;
}

TEST(MixToMono, SumsFewChannelsInOrderThenDivides) {
  const float a[3] = {1.0f, 1e-8f, -1.0f};  // (1 + 1e-8) - 1 = 0 in float32; 1 + (1e-8 - 1) is not
  float out = -1;
  mix_to_mono(a, 1, 3, &out);
  EXPECT_EQ(out, ((1.0f + 1e-8f) + -1.0f) / 3.0f);
}

TEST(MixToMono, EightOrMoreChannelsSumInNumpysPairwiseTree) {
  std::vector<float> a(9);
  for (int c = 0; c < 9; ++c) a[static_cast<std::size_t>(c)] = 1.0f / static_cast<float>(3 + c * 7);
  float out = 0;
  mix_to_mono(a.data(), 1, 9, &out);
  const float tree = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  EXPECT_EQ(out, (tree + a[8]) / 9.0f);
}

TEST(FrameRange, TruncatesSecondsToFramesAsLibrosa) {
  auto r = frame_range({0.333, 1.777}, 16000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, static_cast<std::int64_t>(0.333 * 16000));
  EXPECT_EQ(r->count, static_cast<std::int64_t>((1.777 - 0.333) * 16000));
  EXPECT_EQ(frame_range({}, 16000)->count, -1);
  EXPECT_FALSE(frame_range({2.0, 1.0}, 16000).ok());
  EXPECT_FALSE(frame_range({-0.5, {}}, 16000).ok());
}

TEST(Tokens, FollowTheEncodersFormulas) {
  const auto q25 = audio_model("qwen2.5-omni");
  const auto q3 = audio_model("qwen3-omni");
  ASSERT_TRUE(q25.ok() && q3.ok());
  EXPECT_EQ(q25->tokens(30000), 7500);  // 300 s: 25 tokens a second
  EXPECT_EQ(q25->tokens(1), 0);
  EXPECT_EQ(q25->tokens(4), 1);
  EXPECT_EQ(q3->tokens(3000), 390);  // 30 s: 13 a second
  EXPECT_EQ(q3->tokens(100), 13);
  EXPECT_EQ(q3->tokens(101), 14);
  EXPECT_EQ(q3->tokens(199), 26);
  EXPECT_FALSE(audio_model("whisper").ok());
  EXPECT_FALSE(q25->pads_to_longest);
  EXPECT_TRUE(q3->pads_to_longest);
}

TEST(ValidFrames, AreTheMasksSumForAClipPaddedToALength) {
  EXPECT_EQ(valid_frames(1600, kFixedSamples), 10);
  EXPECT_EQ(valid_frames(1601, kFixedSamples), 11);
  EXPECT_EQ(valid_frames(kFixedSamples + 5, kFixedSamples), 30000);
  EXPECT_EQ(valid_frames(1601, 1601), 10);  // the longest clip: its length // 160
}

TEST(LogMel, SilenceIsTheFloorEverywhere) {
  const std::vector<float> zeros(4000, 0.0f);
  std::vector<float> out(static_cast<std::size_t>(kMelBins) * 25);
  log_mel(zeros, 4000, 25, out.data(), 25);
  for (float v : out) EXPECT_EQ(v, -1.5f);  // (log10(1e-10) + 4) / 4
}

TEST(LogMel, FramesPastTheSignalAreTheFloorAndAPrefixIsTheWhole) {
  std::vector<float> x(3200);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.05 * static_cast<double>(i)));
  const std::size_t length = 16000, frames = frames_of(length);
  std::vector<float> whole(static_cast<std::size_t>(kMelBins) * frames), part(static_cast<std::size_t>(kMelBins) * 30);
  log_mel(x, length, frames, whole.data(), frames);
  log_mel(x, length, 30, part.data(), 30);
  float lowest = whole[0];
  for (float v : whole) lowest = std::min(lowest, v);
  for (int m = 0; m < kMelBins; ++m) {
    for (std::size_t t = 0; t < 30; ++t) EXPECT_EQ(part[m * 30 + t], whole[m * frames + t]);
    for (std::size_t t = 24; t < frames; ++t) EXPECT_EQ(whole[m * frames + t], lowest) << m << " " << t;
  }
}

TEST(Log10, TheSimdKernelIsWithinTwoUlpOfTheScalarReferenceAndFloorsAt1e10) {
  std::vector<float> x;
  for (float v = 1e-12f; v < 1e9f; v *= 1.0137f) x.push_back(v);
  x.push_back(0.0f);
  std::vector<float> simd = x, scalar = x;
  log10_floored(simd.data(), simd.size(), true);
  log10_floored(scalar.data(), scalar.size(), false);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float ulp = std::nextafter(std::fabs(scalar[i]), INFINITY) - std::fabs(scalar[i]);
    EXPECT_LE(std::fabs(simd[i] - scalar[i]), 2 * ulp) << x[i];
  }
  EXPECT_EQ(scalar.back(), -10.0f);
  EXPECT_EQ(simd.back(), -10.0f);
}

TEST(Resample, LengthIsLibrosasCeilingAndEqualRatesCopy) {
  std::vector<float> x(44101, 0.25f);
  auto y = resample(x, 44100, 16000);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->size(), static_cast<std::size_t>(std::ceil(44101 * (16000.0 / 44100))));
  auto same = resample(x, 16000, 16000);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, x);
  EXPECT_FALSE(resample(x, 0, 16000).ok());
}

#if MMFEED_VIDEO_BUILD
TEST(DecodeMono, AveragesStereoPcmAsLibsndfileScalesIt) {
  const auto file = wav({32767, -32768, 100, 300, -5, 7}, 2, 8000);
  auto w = decode_mono(file, {}, {.max_seconds = 60});
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_EQ(w->sample_rate, 8000);
  ASSERT_EQ(w->samples.size(), 3u);
  EXPECT_EQ(w->samples[0], (32767 / 32768.0f + -1.0f) / 2.0f);
  EXPECT_EQ(w->samples[1], (100 / 32768.0f + 300 / 32768.0f) / 2.0f);
}

TEST(DecodeMono, CropsAndRefusesWhatIsTooLongOrCut) {
  std::vector<std::int16_t> ramp(8000);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::int16_t>(i);
  const auto file = wav(ramp, 1, 8000);
  auto w = decode_mono(file, {0.25, 0.5}, {.max_seconds = 60});
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(w->samples.size(), 2000u);
  EXPECT_EQ(w->samples[0], 2000 / 32768.0f);
  auto long_clip = decode_mono(file, {}, {.max_seconds = 0.5});
  ASSERT_FALSE(long_clip.ok());
  EXPECT_EQ(long_clip.error().code(), ErrorCode::kResourceExhausted);
  auto cut = decode_mono(std::span(file).first(file.size() - 100), {}, {.max_seconds = 60});
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("truncated"), std::string::npos);
  auto past = decode_mono(file, {5.0, {}}, {.max_seconds = 60});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.error().message().find("past the clip's end"), std::string::npos);
}

TEST(DecodeMono, Issue48AStartPastAnyClipIsPastTheClipsEndNotTheWholeClip) {
  const auto file = wav(std::vector<std::int16_t>(800, 1), 1, 8000);
  for (const double start : {1e15, 1e18, 1e300}) {
    for (const std::optional<double> end : {std::optional<double>(), std::optional<double>(start * 2)}) {
      auto past = decode_mono(file, {start, end}, {.max_seconds = 60});
      ASSERT_FALSE(past.ok()) << start;
      EXPECT_NE(past.error().message().find("audio_start is past the clip's end"), std::string::npos)
          << past.error().message();
    }
  }
}

TEST(DecodeMono, Issue48TheSamplesBytesAreBoundedAtTheFilesOwnRate) {
  // One second at 48 kHz holds 192,000 bytes of samples: refused under that, from the header,
  // before any is decoded; a stream that says nothing of its length is refused as it grows.
  const auto file = wav(std::vector<std::int16_t>(48000, 7), 1, 48000);
  auto refused = decode_mono(file, {}, {.max_seconds = 60, .max_bytes = 100'000});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().message(),
            "audio: 1 s at 48000 Hz are 192000 bytes of samples, more than the 100000 a clip may hold");
  auto kept = decode_mono(file, {}, {.max_seconds = 60, .max_bytes = 192'000});
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->samples.size(), 48000u);
  EXPECT_LE(kept->samples.capacity() * sizeof(float), 192'000u);
}
#endif

}  // namespace
}  // namespace mmfeed::audio
