// The public audio API (include/mmfeed/audio.h) over the engine's decoder, resampler and features.
#include "mmfeed/audio.h"

#include <fftw3.h>
#include <soxr.h>

#include <algorithm>
#include <new>
#include <optional>

#include "audio/decode.h"
#include "audio/features.h"
#include "audio/profile.h"
#include "audio/resample.h"
#include "core/parallel.h"

#if MMFEED_VIDEO
extern "C" {
#include <libavutil/avutil.h>
}
#endif

namespace mmfeed {

std::string audio_libraries() {
#if MMFEED_VIDEO
  std::string decoder = std::string("FFmpeg ") + av_version_info();
#else
  std::string decoder = "no decoder (built with MMFEED_VIDEO=OFF: samples only)";
#endif
  return decoder + ", " + soxr_version() + ", " + fftw_version;
}

Result<AudioInfo> probe_audio(std::span<const std::byte> bytes) { return audio::probe(bytes); }

Result<std::vector<float>> load_audio(std::span<const std::byte> bytes, const AudioLoadOptions& options) {
  if (options.sampling_rate < 0 || options.sampling_rate > audio::kMaxSampleRate) {
    return Error(ErrorCode::kInvalidArgument,
                 "load_audio: sampling_rate must be 0 to " + std::to_string(audio::kMaxSampleRate) + " Hz");
  }
  // A clip within its limits may still not fit in memory (768 kHz for an hour is 11 GB): an
  // error, as every other limit.
  try {
    auto wave = audio::decode_mono(bytes, {options.start, options.end},
                                   {.max_seconds = options.max_seconds, .max_bytes = options.max_bytes},
                                   options.soundtrack ? audio::Route::kSoundtrack : audio::Route::kLibrosa);
    if (!wave.ok()) return std::move(wave).error();
    if (options.sampling_rate == 0 || options.sampling_rate == wave->sample_rate) return std::move(wave->samples);
    const std::uint64_t held = (wave->samples.size() + audio::resampled_length(wave->samples.size(), wave->sample_rate,
                                                                               options.sampling_rate)) *
                               sizeof(float);
    if (held > options.max_bytes) {
      return Error(ErrorCode::kResourceExhausted,
                   "audio: " + std::to_string(wave->samples.size()) + " samples at " +
                       std::to_string(wave->sample_rate) + " Hz and their resampling to " +
                       std::to_string(options.sampling_rate) + " Hz are " + std::to_string(held) +
                       " bytes, more than the " + std::to_string(options.max_bytes) + " a clip may hold");
    }
    return audio::resample(wave->samples, wave->sample_rate, options.sampling_rate);
  } catch (const std::bad_alloc&) {
    return Error(ErrorCode::kResourceExhausted, "audio: the clip's samples do not fit in memory; lower max_seconds");
  }
}

Result<std::vector<float>> resample_audio(std::span<const float> samples, int from_rate, int to_rate) {
  return audio::resample(samples, from_rate, to_rate);
}

struct AudioProcessor::Impl {
  audio::AudioModel model;
  AudioPadding padding = AudioPadding::kModel;
  double max_seconds = 0;
  int threads = 1;

  // One clip's 16 kHz mono samples: decoded and resampled, or the caller's, cropped.
  Result<std::vector<float>> load(const AudioInput& clip) const {
    if (!clip.encoded.empty()) {
      AudioLoadOptions o;
      o.start = clip.start;
      o.end = clip.end;
      o.max_seconds = max_seconds;
      o.soundtrack = clip.soundtrack;
      return load_audio(clip.encoded, o);
    }
    // As qwen-omni-utils crops an array: samples [int(16000 * start), int(16000 * end)).
    auto range = audio::frame_range({clip.start, clip.end}, audio::kFeatureRate);
    if (!range.ok()) return std::move(range).error();
    const auto size = static_cast<std::int64_t>(clip.samples.size());
    const std::int64_t first = std::min(range->first, size);
    const std::int64_t last = range->count >= 0 ? std::min(size, first + range->count) : size;
    if (static_cast<double>(last - first) > max_seconds * audio::kFeatureRate) {
      return Error(ErrorCode::kResourceExhausted, "audio: " + std::to_string((last - first) / audio::kFeatureRate) +
                                                      " s of samples, over the limit (max_seconds)");
    }
    std::vector<float> samples(clip.samples.begin() + first, clip.samples.begin() + last);
    for (float v : samples) {
      if (!std::isfinite(v)) return Error(ErrorCode::kInvalidArgument, "audio: the samples are not finite everywhere");
    }
    return samples;
  }
};

AudioProcessor::AudioProcessor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AudioProcessor::AudioProcessor(AudioProcessor&&) noexcept = default;
AudioProcessor& AudioProcessor::operator=(AudioProcessor&&) noexcept = default;
AudioProcessor::~AudioProcessor() = default;

Result<AudioProcessor> AudioProcessor::create(const AudioProcessorOptions& options) {
  auto model = audio::audio_model(options.model);
  if (!model.ok()) return std::move(model).error();
  if (!(options.max_seconds > 0) || options.max_seconds > 86400) {
    return Error(ErrorCode::kInvalidArgument, "audio: max_seconds must be above 0 and at most 86400");
  }
  if (options.threads < 1) return Error(ErrorCode::kInvalidArgument, "audio: threads must be 1 or more");
  auto impl = std::make_unique<Impl>();
  impl->model = *model;
  impl->padding = options.padding;
  impl->max_seconds = options.max_seconds;
  impl->threads = options.threads;
  return AudioProcessor(std::move(impl));
}

std::int64_t AudioProcessor::tokens(std::int64_t valid_frames) const { return impl_->model.tokens(valid_frames); }

Result<AudioFeatures> AudioProcessor::process(std::span<const AudioInput> clips) const {
  const std::size_t n = clips.size();
  std::vector<std::vector<float>> waves(n);
  std::vector<std::optional<Error>> errors(n);
  core::parallel(n, impl_->threads, [&](std::size_t i) {
    auto loaded = impl_->load(clips[i]);
    if (loaded.ok()) {
      waves[i] = std::move(*loaded);
    } else {
      errors[i] = std::move(loaded).error();
    }
  });
  for (std::size_t i = 0; i < n; ++i) {
    if (errors[i]) return Error(errors[i]->code(), "audio " + std::to_string(i) + ": " + errors[i]->message());
  }
  const bool longest = impl_->padding == AudioPadding::kLongest ||
                       (impl_->padding == AudioPadding::kModel && impl_->model.pads_to_longest);
  // Padding to the longest clip keeps the fixed-length model's values (its clips are transformed
  // as zero-padded to the fixed length; only the frames past the longest one are left out).
  const bool fixed = !impl_->model.pads_to_longest || impl_->padding == AudioPadding::kMaxLength;
  std::size_t length = audio::kFixedSamples;
  if (!fixed) {
    length = 0;
    for (const auto& w : waves) length = std::max(length, w.size());
    if (n > 0 && length <= audio::kFftSize / 2) {
      return Error(ErrorCode::kInvalidArgument, "audio: the longest clip has " + std::to_string(length) +
                                                    " samples; the STFT's reflect padding needs " +
                                                    std::to_string(audio::kFftSize / 2 + 1) + " or more");
    }
  }
  AudioFeatures out;
  out.clips = n;
  for (auto& w : waves) {
    if (w.size() > length) w.resize(length);  // the fixed length cuts longer clips
    out.valid_frames.push_back(audio::valid_frames(w.size(), length));
    out.tokens.push_back(impl_->model.tokens(out.valid_frames.back()));
  }
  out.frames = audio::frames_of(length);
  if (longest && fixed) {
    out.frames = 0;
    for (std::int64_t v : out.valid_frames) out.frames = std::max(out.frames, static_cast<std::size_t>(v));
  }
  const std::size_t per_clip = static_cast<std::size_t>(audio::kMelBins) * out.frames;
  try {
    out.features.resize(n * per_clip);
    out.mask.resize(n * out.frames);
  } catch (const std::bad_alloc&) {
    return Error(ErrorCode::kResourceExhausted, "audio: cannot allocate the features of " + std::to_string(n) +
                                                    " clips x " + std::to_string(out.frames) + " frames");
  }
  core::parallel(n, impl_->threads, [&](std::size_t i) {
    audio::log_mel(waves[i], length, out.frames, out.features.data() + i * per_clip, out.frames);
    std::fill_n(out.mask.begin() + static_cast<std::ptrdiff_t>(i * out.frames), out.valid_frames[i], 1);
  });
  return out;
}

}  // namespace mmfeed
