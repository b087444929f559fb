// The streaming JPEG path: decode_jpeg_rows gives decode_rgb's rows, and ImageTransform::resize
// (which resizes while decoding where it can) gives what decoding first and resampling gives.
#include <turbojpeg.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "vision/decode.h"
#include "vision/image_transform.h"

namespace mmfeed::vision {
namespace {

// A smooth random picture (waves plus noise, so that every DCT coefficient matters) as a JPEG.
// format: TJPF_RGB (with `subsamp`), TJPF_GRAY or TJPF_CMYK.
std::vector<std::uint8_t> make_jpeg(int width, int height, int subsamp, int format, unsigned seed) {
  std::mt19937 rng(seed);
  const int channels = tjPixelSize[format];
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        const double v = 128 + 100 * std::sin(0.05 * x * (c + 1) + 0.03 * y) + static_cast<int>(rng() % 40) - 20;
        pixels[(static_cast<std::size_t>(y) * width + x) * channels + c] =
            static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  std::unique_ptr<void, decltype(&tjDestroy)> tj(tjInitCompress(), &tjDestroy);
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int samp = format == TJPF_GRAY ? TJSAMP_GRAY : subsamp;
  EXPECT_EQ(tjCompress2(tj.get(), pixels.data(), width, 0, height, format, &jpeg, &size, samp, 90, 0), 0)
      << tjGetErrorStr2(tj.get());
  std::vector<std::uint8_t> out(jpeg, jpeg + size);
  tjFree(jpeg);
  return out;
}

// Rows first_row .. end through decode_jpeg_rows, checking the chunks arrive in order.
std::vector<std::uint8_t> streamed_rows(const std::vector<std::uint8_t>& jpeg, int width, int height, int first_row,
                                        int chunk) {
  std::vector<std::uint8_t> got;
  int next = first_row;
  auto done = decode_jpeg_rows(jpeg, {}, width, height, first_row, chunk, [&](const std::uint8_t* rows, int y, int n) {
    EXPECT_EQ(y, next);
    EXPECT_GE(n, 1);
    EXPECT_LE(n, chunk);
    next = y + n;
    got.insert(got.end(), rows, rows + static_cast<std::size_t>(n) * width * 3);
  });
  EXPECT_TRUE(done.ok() && *done);
  return got;
}

TEST(StreamTest, RowsEqualTheWholeImageDecode) {
  const int w = 203, h = 157;
  for (auto [subsamp, format] : {std::pair{TJSAMP_420, TJPF_RGB}, std::pair{TJSAMP_444, TJPF_RGB},
                                 std::pair{TJSAMP_422, TJPF_RGB}, std::pair{TJSAMP_GRAY, TJPF_GRAY}}) {
    const auto jpeg = make_jpeg(w, h, subsamp, format, 11);
    const RgbImage whole = decode_rgb(jpeg).value();
    const std::vector<std::uint8_t> all(whole.pixels.data(), whole.pixels.data() + whole.pixels.size());
    for (auto [first_row, chunk] : {std::pair{0, 20}, std::pair{0, 1}, std::pair{37, 5}, std::pair{h - 1, 20}}) {
      const auto got = streamed_rows(jpeg, w, h, first_row, chunk);
      const std::vector<std::uint8_t> want(all.begin() + static_cast<std::ptrdiff_t>(first_row) * w * 3, all.end());
      EXPECT_EQ(got, want) << "subsampling " << subsamp << ", rows from " << first_row << " in chunks of " << chunk;
    }
  }
}

TEST(StreamTest, CmykIsLeftToTheWholeImageDecoder) {
  const auto jpeg = make_jpeg(64, 48, TJSAMP_444, TJPF_CMYK, 3);
  int calls = 0;
  auto done = decode_jpeg_rows(jpeg, {}, 64, 48, 0, 20, [&](const std::uint8_t*, int, int) { ++calls; });
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(*done);
  EXPECT_EQ(calls, 0);
}

TEST(StreamTest, TruncatedOversizedOrMisplannedInputFails) {
  const auto jpeg = make_jpeg(300, 200, TJSAMP_420, TJPF_RGB, 5);
  const std::vector<std::uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() / 2));
  auto streamed = decode_jpeg_rows(cut, {}, 300, 200, 0, 20, [](const std::uint8_t*, int, int) {});
  ASSERT_FALSE(streamed.ok());
  EXPECT_EQ(streamed.error().code(), ErrorCode::kCorruptData);
  EXPECT_NE(streamed.error().message().find("corrupt or truncated"), std::string::npos) << streamed.error().message();
  EXPECT_FALSE(decode_rgb(cut).ok());
  DecodeOptions small;
  small.max_pixels = 1000;
  auto bomb = decode_jpeg_rows(jpeg, small, 300, 200, 0, 20, [](const std::uint8_t*, int, int) {});
  ASSERT_FALSE(bomb.ok());
  EXPECT_EQ(bomb.error().code(), ErrorCode::kResourceExhausted);
  auto other = decode_jpeg_rows(jpeg, {}, 300, 199, 0, 20, [](const std::uint8_t*, int, int) { FAIL(); });
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message().find("decodes to 300x200, its header was read as 300x199"), std::string::npos)
      << other.error().message();
}

// resize() streams where it can (horizontal-first shrinks of upright JPEGs) and decodes whole
// otherwise (vertical-first, width unchanged, CMYK): always decode_rgb + resample_u8's bytes.
TEST(StreamTest, AJpegCutBeforeItsFrameHeaderIsCorruptNotEmpty) {
  // libjpeg-turbo reads such a header as 0x0: the probe must call the file broken, not hand an
  // empty image on (whose error then read "image of 0x0 has no pixels").
  const auto jpeg = make_jpeg(300, 200, TJSAMP_420, TJPF_RGB, 5);
  for (std::size_t keep : {10u, 100u}) {
    const std::vector<std::uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(keep));
    auto info = probe(cut);
    ASSERT_FALSE(info.ok()) << keep;
    EXPECT_EQ(info.error().code(), ErrorCode::kCorruptData);
    EXPECT_NE(info.error().message().find("JPEG data of " + std::to_string(keep) + " bytes is corrupt or truncated"),
              std::string::npos)
        << info.error().message();
  }
}

TEST(StreamTest, ResizeEqualsDecodeThenResample) {
  struct Case {
    int w, h, subsamp, format;
    std::int64_t max_pixels;
  };
  for (const Case& c : {Case{640, 480, TJSAMP_420, TJPF_RGB, 100'000}, Case{1001, 333, TJSAMP_444, TJPF_RGB, 60'000},
                        Case{300, 900, TJSAMP_420, TJPF_RGB, 40'000}, Case{500, 500, TJSAMP_GRAY, TJPF_GRAY, 90'000},
                        Case{224, 700, TJSAMP_420, TJPF_RGB, 150'000}, Case{320, 240, TJSAMP_444, TJPF_CMYK, 30'000}}) {
    const auto jpeg = make_jpeg(c.w, c.h, c.subsamp, c.format, static_cast<unsigned>(c.w));
    ModelProfile profile = model_profile("qwen2-vl").value();
    profile.max_pixels = c.max_pixels;
    for (ImageKernel kernel : {ImageKernel::kAuto, ImageKernel::kPortable, ImageKernel::kScalar}) {
      ProcessorConfig config;
      config.profile = profile;
      config.kernel = kernel;
      ImageTransform proc(config);
      const Resized got = proc.resize(jpeg).value();
      const RgbImage whole = decode_rgb(jpeg).value();
      const Size size = smart_resize(whole.height, whole.width, profile).value();
      ASSERT_EQ(got.image.width, size.width);
      ASSERT_EQ(got.image.height, size.height);
      std::vector<std::uint8_t> want(static_cast<std::size_t>(size.width) * size.height * 3);
      resample_u8(whole.pixels.data(), whole.width, whole.height, 3, want.data(), size.width, size.height,
                  ResizeFilter::kBicubic, ImageKernel::kScalar);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.image.pixels.data()))
          << c.w << "x" << c.h << " -> " << size.width << "x" << size.height;
    }
  }
}

}  // namespace
}  // namespace mmfeed::vision
