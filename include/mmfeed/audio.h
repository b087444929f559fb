// Audio as the Qwen Omni models' processors take it: a clip loaded as librosa.load(path, sr=16000)
// loads it (decoded, cropped to audio_start/audio_end, averaged to mono as numpy averages, resampled
// with libsoxr's HQ recipe, cut or zero-padded to the resampled length), then transformers'
// WhisperFeatureExtractor's log-mel spectrogram (128 mel bins, 25 ms windows every 10 ms) with the
// model's padding: Qwen2.5-Omni pads every clip to 300 s, Qwen3-Omni to the longest clip of the call.
//
// Example:
//   AudioProcessorOptions o;
//   o.model = "qwen2.5-omni";
//   MMFEED_ASSIGN_OR_RETURN(AudioProcessor proc, AudioProcessor::create(o));
//   AudioInput in;
//   in.encoded = wav_bytes;                              // a std::span<const std::byte>
//   MMFEED_ASSIGN_OR_RETURN(AudioFeatures f, proc.process({&in, 1}));
//   // f.features: clips x 128 x f.frames float32 (input_features),
//   // f.mask: clips x f.frames int32 (feature_attention_mask), f.tokens[0]: the clip's audio tokens
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/choices.h"
#include "mmfeed/error.h"

namespace mmfeed {

// The libraries audio is decoded (FFmpeg's, when the build has them), resampled and transformed with.
std::string audio_libraries();

struct AudioInfo {  // a container's best audio stream
  int sample_rate = 0;
  int channels = 0;
  double duration_s = 0;  // as the container states it (0 when it does not)
  std::string codec;      // "pcm_s16le", "flac", "mp3", "aac", ...
  std::string container;  // FFmpeg's demuxer name: "wav", "ogg", "mov,mp4,m4a,3gp,3g2,mj2", ...
};
Result<AudioInfo> probe_audio(std::span<const std::byte> bytes);

struct AudioLoadOptions {
  int sampling_rate = 16000;      // 0: the file's own rate, not resampled
  std::optional<double> start{};  // seconds: audio_start
  std::optional<double> end{};    // seconds: audio_end
  double max_seconds = 3600;      // longer clips (after the crop) are refused before they are decoded
  // The most bytes the clip may hold while it is loaded: its samples at the file's own rate and,
  // resampled, at `sampling_rate` (a 384 kHz file holds 24 times its 16 kHz samples). Refused
  // from the container's stated length before decoding, and before each buffer grows.
  std::uint64_t max_bytes = UINT64_MAX;
  // Read as qwen-omni-utils reads a video's soundtrack (use_audio_in_video): always through
  // FFmpeg's 16-bit samples, whatever the container.
  bool soundtrack = false;
};

// The clip as mono float32 samples at `sampling_rate`, equal to librosa.load(path, sr, mono=True,
// offset=start, duration=end - start). Files libsndfile reads (WAV, FLAC, Ogg, MP3, AIFF, ...)
// come out as libsndfile scales them; others (AAC/M4A, the audio of MP4/MKV/WebM) as librosa's
// FFmpeg fallback does, through 16-bit samples.
Result<std::vector<float>> load_audio(std::span<const std::byte> bytes, const AudioLoadOptions& options = {});

// The mono samples resampled from `from_rate` to `to_rate` as librosa.resample(res_type="soxr_hq"),
// that length: ceil(n * to_rate / from_rate).
Result<std::vector<float>> resample_audio(std::span<const float> samples, int from_rate, int to_rate);

// How the clips of one call are padded: AudioPadding (choices.h), as the Loader pads a batch's.

struct AudioProcessorOptions {
  std::string model = "qwen2.5-omni";  // qwen2.5-omni, qwen3-omni
  AudioPadding padding = AudioPadding::kModel;
  double max_seconds = 3600;  // clips longer than this (after the crop) are refused by index
  int threads = 1;            // clips of one process() call loaded and transformed at once
};

// One clip: encoded bytes (cropped to start/end), or mono float32 samples already at 16 kHz
// (cropped, not resampled, as qwen-omni-utils takes an array).
struct AudioInput {
  std::span<const std::byte> encoded{};
  std::span<const float> samples{};
  std::optional<double> start{};
  std::optional<double> end{};
  bool soundtrack = false;  // encoded bytes: a video's soundtrack (AudioLoadOptions::soundtrack)
};

struct AudioFeatures {
  std::size_t clips = 0;
  std::size_t frames = 0;                  // T: the padded length / 160
  std::vector<float> features;             // clips x 128 x frames: input_features
  std::vector<std::int32_t> mask;          // clips x frames: feature_attention_mask
  std::vector<std::int64_t> valid_frames;  // per clip: the mask's sum
  std::vector<std::int64_t> tokens;        // per clip: the audio tokens the model's encoder makes of them
};

class AudioProcessor {
 public:
  // kInvalidArgument for an unknown model or a value out of range.
  static Result<AudioProcessor> create(const AudioProcessorOptions& options);
  AudioProcessor(AudioProcessor&&) noexcept;
  AudioProcessor& operator=(AudioProcessor&&) noexcept;
  ~AudioProcessor();

  // The clips' features in one call (one padding); an error names the clip by index. Thread-safe.
  Result<AudioFeatures> process(std::span<const AudioInput> clips) const;
  // The audio tokens the model's encoder makes of `valid_frames` feature frames.
  std::int64_t tokens(std::int64_t valid_frames) const;

 private:
  struct Impl;
  explicit AudioProcessor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mmfeed
