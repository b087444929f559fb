// The audio kernels: log-mel features (FFT, mel filters, log), resampling (libsoxr HQ), and
// decoding a WAV clip to mono. bench/audio.py compares whole clips with librosa + transformers.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "audio/decode.h"
#include "audio/features.h"
#include "audio/resample.h"

namespace {

std::vector<float> signal(std::size_t n) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i);
    x[i] = static_cast<float>(0.3 * std::sin(0.07 * t) + 0.2 * std::sin(0.011 * t * (1 + t * 1e-6)));
  }
  return x;
}

// 10 s of 16 kHz audio: 1000 frames of 128 mel bins.
void BM_LogMel(benchmark::State& state) {
  const auto x = signal(160000);
  const std::size_t frames = mmfeed::audio::frames_of(x.size());
  std::vector<float> out(static_cast<std::size_t>(mmfeed::audio::kMelBins) * frames);
  for (auto _ : state) {
    mmfeed::audio::log_mel(x, x.size(), frames, out.data(), frames);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(frames));
}
BENCHMARK(BM_LogMel)->Unit(benchmark::kMillisecond);

// 10 s at 44.1 kHz to 16 kHz.
void BM_Resample(benchmark::State& state) {
  const auto x = signal(441000);
  for (auto _ : state) {
    auto y = mmfeed::audio::resample(x, 44100, 16000);
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_Resample)->Unit(benchmark::kMillisecond);

// 10 s of 16-bit stereo WAV at 44.1 kHz to mono float samples.
void BM_DecodeWav(benchmark::State& state) {
  const std::size_t frames = 441000;
  std::vector<std::byte> file(44 + frames * 4);
  const auto put32 = [&](std::size_t at, std::uint32_t v) { std::memcpy(file.data() + at, &v, 4); };
  const auto put16 = [&](std::size_t at, std::uint16_t v) { std::memcpy(file.data() + at, &v, 2); };
  std::memcpy(file.data(), "RIFF", 4);
  put32(4, static_cast<std::uint32_t>(36 + frames * 4));
  std::memcpy(file.data() + 8, "WAVEfmt ", 8);
  put32(16, 16);
  put16(20, 1);
  put16(22, 2);
  put32(24, 44100);
  put32(28, 44100 * 4);
  put16(32, 4);
  put16(34, 16);
  std::memcpy(file.data() + 36, "data", 4);
  put32(40, static_cast<std::uint32_t>(frames * 4));
  for (auto _ : state) {
    auto w = mmfeed::audio::decode_mono(file, {}, {.max_seconds = 60});
    benchmark::DoNotOptimize(w);
  }
}
BENCHMARK(BM_DecodeWav)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
