// transformers' WhisperFeatureExtractor as the Qwen Omni processors call it: 128 slaney mel bins
// over 0-8000 Hz of a 400-point periodic-Hann STFT every 160 samples (reflect-padded centre,
// power, the last frame dropped), log10 floored at 1e-10 and at the clip's max - 8, (x + 4) / 4.
// The transform and the mel energies in float64 (FFTW) where the reference's torch path runs in
// float32; the energies rounded to float32 and their log10 in float32, as the reference takes it.
// Equal to it within float32's rounding where the spectrum is above the floor's neighbourhood
// (tests/python/audio/test_audio_features.py: the tolerances and why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace mmfeed::audio {

inline constexpr int kFeatureRate = 16000;
inline constexpr int kFftSize = 400;
inline constexpr int kHop = 160;
inline constexpr int kMelBins = 128;

// A clip's frames when its samples are zero-padded to `padded_length`: that / 160.
inline std::size_t frames_of(std::size_t padded_length) { return padded_length / kHop; }

// feature_attention_mask's sum for a clip of `samples` padded to `padded_length`:
// min(ceil(samples / 160), padded_length / 160).
std::int64_t valid_frames(std::size_t samples, std::size_t padded_length);

// The clip's log-mel features as the extractor computes them for `samples` zero-padded to
// `padded_length` (>= samples.size()): the first `frames_out` (<= frames_of(padded_length)) of
// its frames written to `out`, 128 rows of `row_stride` floats.
void log_mel(std::span<const float> samples, std::size_t padded_length, std::size_t frames_out, float* out,
             std::size_t row_stride);

}  // namespace mmfeed::audio
