// Sample-rate conversion as librosa.resample(res_type="soxr_hq") does it: libsoxr's HQ recipe
// (20-bit precision, its single-precision SIMD engine) on float32 samples, the result cut or
// zero-padded to ceil(n * to / from) samples (librosa's fix_length).
#pragma once

#include <span>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed::audio {

Result<std::vector<float>> resample(std::span<const float> samples, int from_rate, int to_rate);

}  // namespace mmfeed::audio
