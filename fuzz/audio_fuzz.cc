// Fuzz target: the audio decoder (FFmpeg's demuxers and decoders behind our checks), the
// resampler and the log-mel features. Invariants checked: a loaded clip is non-empty, finite and
// exactly as long as librosa's length rule makes it; its features have the mask's shape and are
// finite; nothing aborts.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "audio/decode.h"
#include "audio/features.h"
#include "audio/resample.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::audio;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto wave = decode_mono(bytes, {}, {.max_seconds = 4.0, .max_bytes = 16 << 20});  // keep each input cheap
  if (!wave.ok()) return 0;
  if (wave->samples.empty()) std::abort();
  auto resampled = resample(wave->samples, wave->sample_rate, kFeatureRate);
  if (!resampled.ok()) return 0;
  const auto n = wave->samples.size();
  if (resampled->size() !=
      static_cast<std::size_t>(std::ceil(static_cast<double>(n) * kFeatureRate / wave->sample_rate))) {
    std::abort();
  }
  const std::size_t padded = std::max<std::size_t>(resampled->size(), kFftSize);
  const std::size_t frames = frames_of(padded);
  std::vector<float> features(static_cast<std::size_t>(kMelBins) * frames);
  log_mel(*resampled, padded, frames, features.data(), frames);
  for (float v : features) {
    if (!std::isfinite(v)) std::abort();
  }
  return 0;
}
