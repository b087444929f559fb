// Audio files to mono samples at their own rate, as librosa.load(path, sr=None, mono=True,
// offset, duration) reads them: decoded with FFmpeg's libraries, scaled as libsndfile scales each
// sample format (or, for the containers libsndfile does not read, through 16-bit samples as
// librosa's FFmpeg fallback gets them), cropped, and averaged over the channels in numpy's order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "mmfeed/audio.h"
#include "mmfeed/error.h"

namespace mmfeed::audio {

inline constexpr int kMaxSampleRate = 768000;
inline constexpr int kMaxChannels = 64;

struct Crop {
  std::optional<double> start;  // seconds
  std::optional<double> end;
};

// How samples become floats: as librosa.load reads the file (libsndfile's scaling, or FFmpeg's
// 16-bit samples for the containers libsndfile does not read), or always through FFmpeg's 16-bit
// samples, as qwen-omni-utils reads a video's soundtrack (audioread, whatever the container).
enum class Route { kLibrosa, kSoundtrack };

struct Waveform {
  int sample_rate = 0;
  std::vector<float> samples;  // mono
};

Result<AudioInfo> probe(std::span<const std::byte> bytes);

// A clip's facts from its header alone: its first bytes `head` and, where given, its last `tail`
// of a file of `size` bytes (a read into the gap between them fails): as probe() states them
// where the header says them (a remote clip's cost facts, read by ranged GETs).
Result<AudioInfo> probe_header(std::span<const std::byte> head, std::span<const std::byte> tail, std::uint64_t size);

// What one clip may take: its length after the crop, and the bytes of its mono float32 samples
// at the file's own rate (what the decoder holds, whatever rate they are resampled to later).
struct ClipLimits {
  double max_seconds = 3600;
  std::uint64_t max_bytes = UINT64_MAX;
};

// The limits bound the cropped clip: refused from the container's stated duration before
// decoding, and again before each decoded frame is kept (a container may understate it); the
// samples' buffer never grows past them.
Result<Waveform> decode_mono(std::span<const std::byte> bytes, const Crop& crop, const ClipLimits& limits,
                             Route route = Route::kLibrosa);

// Averages `channels` interleaved channels of `frames` frames into `out` as numpy's mean over the
// channel axis does (float32 pairwise summation, then one division).
void mix_to_mono(const float* interleaved, std::size_t frames, int channels, float* out);

// The crop as frames of a `sample_rate` stream: [first, first + count), count -1 for to the end;
// kInvalidArgument for a negative start or an end before the start.
struct FrameRange {
  std::int64_t first = 0;
  std::int64_t count = -1;
};
Result<FrameRange> frame_range(const Crop& crop, int sample_rate);

}  // namespace mmfeed::audio
