// Microbenchmarks for the vision kernels, each beside its reference in the same run: the
// horizontal + vertical resample and the vertical pass alone, on rows in cache and read from
// memory (byte-dot, Highway, scalar), normalize + patchify for each output type (SIMD, table),
// and JPEG decoding whole vs streamed into the resample. Inputs are made at start-up: a
// 2000x1500 RGB picture (waves plus noise), its JPEG at quality 90, 4:2:0, and the Qwen2-VL
// target at the SFT budget (1148x840). Run: build/vision_bench (or `make bench`).
#include <benchmark/benchmark.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "vision/decode.h"
#include "vision/image_transform.h"
#include "vision/patchify.h"
#include "vision/profile.h"
#include "vision/resample.h"

namespace mmfeed::vision {
namespace {

constexpr int kWidth = 2000, kHeight = 1500, kOutWidth = 1148, kOutHeight = 840;

const std::vector<std::uint8_t>& picture() {
  static const std::vector<std::uint8_t> pixels = [] {
    std::mt19937 rng(1);
    std::vector<std::uint8_t> p(static_cast<std::size_t>(kWidth) * kHeight * 3);
    for (int y = 0; y < kHeight; ++y) {
      for (int x = 0; x < kWidth; ++x) {
        for (int c = 0; c < 3; ++c) {
          const double v = 128 + 90 * std::sin(0.013 * x * (c + 1) + 0.007 * y) + static_cast<int>(rng() % 30) - 15;
          p[(static_cast<std::size_t>(y) * kWidth + x) * 3 + c] = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
        }
      }
    }
    return p;
  }();
  return pixels;
}

const std::vector<std::uint8_t>& jpeg() {
  static const std::vector<std::uint8_t> bytes = [] {
    std::unique_ptr<void, decltype(&tjDestroy)> tj(tjInitCompress(), &tjDestroy);
    unsigned char* out = nullptr;
    unsigned long size = 0;
    tjCompress2(tj.get(), picture().data(), kWidth, 0, kHeight, TJPF_RGB, &out, &size, TJSAMP_420, 90, 0);
    std::vector<std::uint8_t> v(out, out + size);
    tjFree(out);
    return v;
  }();
  return bytes;
}

ModelProfile sft_profile() {
  ModelProfile p = model_profile("qwen2-vl").value();
  p.max_pixels = 1003520;
  return p;
}

// Arg: 0 = kAuto (byte-dot where the CPU has it), 1 = kPortable (Highway), 2 = kScalar.
ImageKernel kernel_arg(const benchmark::State& state) {
  return state.range(0) == 0 ? ImageKernel::kAuto : state.range(0) == 1 ? ImageKernel::kPortable : ImageKernel::kScalar;
}

void BM_Resample(benchmark::State& state) {
  const ImageKernel kernel = kernel_arg(state);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(kOutWidth) * kOutHeight * 3);
  for (auto _ : state) {
    resample_u8(picture().data(), kWidth, kHeight, 3, out.data(), kOutWidth, kOutHeight, ResizeFilter::kBicubic,
                kernel);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(state.range(0) == 0 ? simd_target() : state.range(0) == 1 ? "portable" : "scalar");
}
BENCHMARK(BM_Resample)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// The vertical pass alone: the horizontal pass's output height (1148x1500) -> 1148x840.
void BM_ResampleVertical(benchmark::State& state) {
  const ImageKernel kernel = kernel_arg(state);
  std::vector<std::uint8_t> in(static_cast<std::size_t>(kOutWidth) * kHeight * 3);
  resample_u8(picture().data(), kWidth, kHeight, 3, in.data(), kOutWidth, kHeight, ResizeFilter::kBicubic);
  std::vector<std::uint8_t> out(static_cast<std::size_t>(kOutWidth) * kOutHeight * 3);
  for (auto _ : state) {
    resample_u8(in.data(), kOutWidth, kHeight, 3, out.data(), kOutWidth, kOutHeight, ResizeFilter::kBicubic, kernel);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(state.range(0) == 0 ? simd_target() : state.range(0) == 1 ? "portable" : "scalar");
}
BENCHMARK(BM_ResampleVertical)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// The vertical pass reading its rows from memory, as the whole-image paths do (a decoded
// picture larger than the caches): 1148x3000 -> 1148x840, the caches flushed before each run.
void BM_ResampleVerticalCold(benchmark::State& state) {
  const ImageKernel kernel = kernel_arg(state);
  constexpr int kTall = 3000;
  std::vector<std::uint8_t> in(static_cast<std::size_t>(kOutWidth) * kTall * 3);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = picture()[i % picture().size()];
  std::vector<std::uint8_t> out(static_cast<std::size_t>(kOutWidth) * kOutHeight * 3);
  std::vector<std::uint8_t> flush(std::size_t{128} << 20);
  for (auto _ : state) {
    state.PauseTiming();
    for (std::size_t i = 0; i < flush.size(); i += 64) flush[i]++;
    state.ResumeTiming();
    resample_u8(in.data(), kOutWidth, kTall, 3, out.data(), kOutWidth, kOutHeight, ResizeFilter::kBicubic, kernel);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(state.range(0) == 0 ? simd_target() : "portable");
}
BENCHMARK(BM_ResampleVerticalCold)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Args: output type (0 float32, 1 bfloat16, 2 uint8); 0 = the SIMD kernel, 1 = the table.
void BM_Patchify(benchmark::State& state) {
  const ModelProfile p = sft_profile();
  const NormalizeTable table(p);
  const Pixels type = std::vector<Pixels>{Pixels::kFloat32, Pixels::kBFloat16,
                                          Pixels::kUInt8}[static_cast<std::size_t>(state.range(0))];
  const Grid grid = grid_for(Size{kOutHeight, kOutWidth}, p);
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(kOutWidth) * kOutHeight * 3);
  resample_u8(picture().data(), kWidth, kHeight, 3, rgb.data(), kOutWidth, kOutHeight, ResizeFilter::kBicubic);
  const std::size_t bytes = static_cast<std::size_t>(grid.rows()) * row_elements(p, type) * element_size(type);
  std::vector<std::uint8_t> rows(bytes);
  for (auto _ : state) {
    patchify(rgb.data(), grid, p, table, type, rows.data(),
             state.range(1) == 0 ? ImageKernel::kAuto : ImageKernel::kScalar);
    benchmark::DoNotOptimize(rows.data());
  }
  const char* names[] = {"float32", "bfloat16", "uint8"};
  state.SetLabel(std::string(names[state.range(0)]) + (state.range(1) == 0 ? " simd" : " table"));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_Patchify)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond);

void BM_DecodeWhole(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(decode_rgb(jpeg()).value().pixels.data());
}
BENCHMARK(BM_DecodeWhole)->Unit(benchmark::kMillisecond);

void BM_DecodeStreamed(benchmark::State& state) {
  for (auto _ : state) {
    auto done = decode_jpeg_rows(jpeg(), {}, kWidth, kHeight, 0, 20,
                                 [](const std::uint8_t* rows, int, int) { benchmark::DoNotOptimize(rows); });
    benchmark::DoNotOptimize(done.ok());
  }
}
BENCHMARK(BM_DecodeStreamed)->Unit(benchmark::kMillisecond);

// The processor's resize: streamed (decode chunks into the horizontal pass) against decoding
// the whole image first and resampling it.
void BM_ResizeStreamed(benchmark::State& state) {
  ProcessorConfig config;
  config.profile = sft_profile();
  const ImageTransform proc(config);
  for (auto _ : state) benchmark::DoNotOptimize(proc.resize(jpeg()).value().image.pixels.data());
}
BENCHMARK(BM_ResizeStreamed)->Unit(benchmark::kMillisecond);

void BM_ResizeDecodeThenResample(benchmark::State& state) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(kOutWidth) * kOutHeight * 3);
  for (auto _ : state) {
    const RgbImage whole = decode_rgb(jpeg()).value();
    resample_u8(whole.pixels.data(), whole.width, whole.height, 3, out.data(), kOutWidth, kOutHeight,
                ResizeFilter::kBicubic);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_ResizeDecodeThenResample)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mmfeed::vision

BENCHMARK_MAIN();
