// Sample-rate conversion as librosa.resample(res_type="soxr_hq") does it: libsoxr's HQ recipe
// (20-bit precision, its single-precision SIMD engine) on float32 samples, the result cut or
// zero-padded to ceil(n * to / from) samples (librosa's fix_length).
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed::audio {

// How many samples `n` samples at `from_rate` become at `to_rate`, as librosa counts them:
// int(np.ceil(n * float(to_rate) / from_rate)).
inline std::size_t resampled_length(std::size_t n, int from_rate, int to_rate) {
  return static_cast<std::size_t>(std::ceil(static_cast<double>(n) * (static_cast<double>(to_rate) / from_rate)));
}

Result<std::vector<float>> resample(std::span<const float> samples, int from_rate, int to_rate);

}  // namespace mmfeed::audio
