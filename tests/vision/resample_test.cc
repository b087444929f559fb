#include "vision/resample.h"

#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <array>
#include <random>
#include <vector>

namespace mmfeed::vision {
namespace {

TEST(ResampleTest, CoefficientsSumToOneInFixedPoint) {
  for (int in : {7, 100, 1999}) {
    for (int out : {1, 3, 56, 700, 2500}) {
      const Coefficients c = precompute_coefficients(in, out, ResizeFilter::kBicubic);
      for (int i = 0; i < out; ++i) {
        std::int64_t sum = 0;
        for (int t = 0; t < c.count[i]; ++t) sum += c.k[static_cast<std::size_t>(i) * c.ksize + t];
        EXPECT_NEAR(static_cast<double>(sum), 1 << 22, c.count[i]) << in << "->" << out << " at " << i;
        EXPECT_GE(c.first[i], 0);
        EXPECT_LE(c.first[i] + c.count[i], in);
      }
    }
  }
}

// The SIMD kernels (kSimd: the fastest this CPU runs, the byte-dot horizontal pass where it has
// AVX-512 VBMI and VNNI; kPortable: the Highway kernels) and the scalar reference compute the
// same integers: identical bytes on random sizes (shrinking up to 400x, growing), both pass
// orders, every filter and channel count.
TEST(ResampleTest, SimdMatchesScalarOnRandomSizes) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> size(1, 400);
  for (int round = 0; round < 300; ++round) {
    const int in_w = size(rng), in_h = size(rng), out_w = size(rng), out_h = size(rng);
    const int channels = std::vector<int>{1, 3, 4}[round % 3];
    const ResizeFilter filter =
        std::vector<ResizeFilter>{ResizeFilter::kBicubic, ResizeFilter::kBilinear, ResizeFilter::kLanczos,
                                  ResizeFilter::kBicubicTorch}[round % 7 % 4];
    std::vector<std::uint8_t> in(static_cast<std::size_t>(in_w) * in_h * channels);
    for (auto& v : in) v = static_cast<std::uint8_t>(rng());
    std::vector<std::uint8_t> scalar(static_cast<std::size_t>(out_w) * out_h * channels);
    std::vector<std::uint8_t> simd(scalar.size());
    const ImageKernel kernel = round % 2 ? ImageKernel::kSimd : ImageKernel::kPortable;
    resample_u8(in.data(), in_w, in_h, channels, scalar.data(), out_w, out_h, filter, ImageKernel::kScalar);
    resample_u8(in.data(), in_w, in_h, channels, simd.data(), out_w, out_h, filter, kernel);
    ASSERT_EQ(scalar, simd) << in_w << "x" << in_h << "->" << out_w << "x" << out_h << " ch" << channels
                            << (kernel == ImageKernel::kSimd ? " simd" : " portable");
  }
}

// The Highway kernels on every SIMD target this CPU runs (AVX3, AVX2, SSE4, ... down to the
// scalar target): the same bytes as the reference.
TEST(ResampleTest, PortableKernelsMatchScalarOnEveryTarget) {
  std::mt19937 rng(4321);
  std::uniform_int_distribution<int> size(1, 200);
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    for (int round = 0; round < 30; ++round) {
      const int in_w = size(rng), in_h = size(rng), out_w = size(rng), out_h = size(rng);
      const int channels = round % 2 ? 3 : 1 + round % 4;
      std::vector<std::uint8_t> in(static_cast<std::size_t>(in_w) * in_h * channels);
      for (auto& v : in) v = static_cast<std::uint8_t>(rng());
      std::vector<std::uint8_t> scalar(static_cast<std::size_t>(out_w) * out_h * channels), simd(scalar.size());
      resample_u8(in.data(), in_w, in_h, channels, scalar.data(), out_w, out_h, ResizeFilter::kBicubic,
                  ImageKernel::kScalar);
      resample_u8(in.data(), in_w, in_h, channels, simd.data(), out_w, out_h, ResizeFilter::kBicubic,
                  ImageKernel::kPortable);
      ASSERT_EQ(scalar, simd) << hwy::TargetName(target) << " " << in_w << "x" << in_h << "->" << out_w << "x" << out_h;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Photograph-sized RGB shrinks (the Qwen-VL budget's shapes) on both SIMD paths, with extreme
// pixel values, where the byte-dot sums are largest: horizontal and vertical passes, and the
// vertical pass alone (heights shrinking 1.8x and 3.6x, rows of whole and partial 64-byte blocks).
TEST(ResampleTest, LargeRgbShrinksMatchScalar) {
  std::mt19937 rng(99);
  for (auto [in_w, in_h, out_w, out_h] :
       {std::array<int, 4>{2000, 61, 1148, 20}, std::array<int, 4>{4000, 23, 1148, 7},
        std::array<int, 4>{1154, 9, 1148, 9}, std::array<int, 4>{333, 17, 1001, 40},
        std::array<int, 4>{1148, 300, 1148, 168}, std::array<int, 4>{100, 3000, 100, 840}}) {
    std::vector<std::uint8_t> in(static_cast<std::size_t>(in_w) * in_h * 3);
    for (auto& v : in) v = rng() % 3 == 0 ? 255 : rng() % 2 ? 0 : static_cast<std::uint8_t>(rng());
    std::vector<std::uint8_t> scalar(static_cast<std::size_t>(out_w) * out_h * 3), simd(scalar.size()),
        portable(scalar.size());
    resample_u8(in.data(), in_w, in_h, 3, scalar.data(), out_w, out_h, ResizeFilter::kBicubic, ImageKernel::kScalar);
    resample_u8(in.data(), in_w, in_h, 3, simd.data(), out_w, out_h, ResizeFilter::kBicubic, ImageKernel::kSimd);
    resample_u8(in.data(), in_w, in_h, 3, portable.data(), out_w, out_h, ResizeFilter::kBicubic,
                ImageKernel::kPortable);
    EXPECT_EQ(scalar, simd) << in_w << "x" << in_h << "->" << out_w << "x" << out_h;
    EXPECT_EQ(scalar, portable) << in_w << "x" << in_h << "->" << out_w << "x" << out_h;
  }
}

// RowResampler runs each output row's vertical pass as soon as its input rows are in: fed in
// chunks of any size (one row, a few, all at once), the bytes are the same, for every kernel.
TEST(ResampleTest, RowResamplerGivesTheSameBytesForAnyChunking) {
  std::mt19937 rng(5);
  for (auto [in_w, in_h, out_w, out_h] : {std::array<int, 4>{300, 211, 97, 64}, std::array<int, 4>{128, 90, 77, 130},
                                          std::array<int, 4>{640, 480, 401, 300}}) {
    std::vector<std::uint8_t> in(static_cast<std::size_t>(in_w) * in_h * 3);
    for (auto& v : in) v = static_cast<std::uint8_t>(rng());
    std::vector<std::uint8_t> whole(static_cast<std::size_t>(out_w) * out_h * 3);
    for (ImageKernel kernel : {ImageKernel::kScalar, ImageKernel::kPortable, ImageKernel::kSimd}) {
      {
        RowResampler r(in_w, in_h, out_w, out_h, 3, ResizeFilter::kBicubic, kernel, whole.data());
        r.push(in.data(), 0, in_h);
      }
      for (int chunk : {1, 3, 7, 40}) {
        std::vector<std::uint8_t> got(whole.size(), 0);
        RowResampler r(in_w, in_h, out_w, out_h, 3, ResizeFilter::kBicubic, kernel, got.data());
        for (int y = 0; y < in_h; y += chunk) {
          r.push(in.data() + static_cast<std::size_t>(y) * in_w * 3, y, std::min(chunk, in_h - y));
        }
        EXPECT_EQ(got, whole) << in_w << "x" << in_h << "->" << out_w << "x" << out_h << " chunk " << chunk;
      }
    }
  }
}

TEST(ResampleTest, ConstantImagesStayConstant) {
  std::vector<std::uint8_t> in(123 * 77 * 3, 200);
  std::vector<std::uint8_t> out(61 * 190 * 3);
  resample_u8(in.data(), 123, 77, 3, out.data(), 61, 190, ResizeFilter::kBicubic);
  for (auto v : out) ASSERT_EQ(v, 200);
}

TEST(ResampleTest, SameSizeIsACopy) {
  std::vector<std::uint8_t> in(10 * 10 * 3);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(i * 7);
  std::vector<std::uint8_t> out(in.size());
  resample_u8(in.data(), 10, 10, 3, out.data(), 10, 10, ResizeFilter::kBicubic);
  EXPECT_EQ(in, out);
}

TEST(ResampleTest, ReportsItsSimdTarget) { EXPECT_NE(std::string(simd_target()), ""); }

}  // namespace
}  // namespace mmfeed::vision
