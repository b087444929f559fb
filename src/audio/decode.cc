#include "audio/decode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if MMFEED_VIDEO
#include "media/ffmpeg.h"
extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/common.h>
#include <libavutil/samplefmt.h>
}
#endif

namespace mmfeed::audio {

namespace {

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", s);
  return text;
}

// numpy's pairwise sum of n float32 values with stride `step` (numpy/_core/src/umath/loops_utils.h):
// a plain loop below 8 values, eight partial sums combined as a tree up to 128.
float pairwise_sum(const float* a, int n, int step) {
  if (n < 8) {
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += a[i * step];
    return sum;
  }
  float r[8];
  for (int j = 0; j < 8; ++j) r[j] = a[j * step];
  int i = 8;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) r[j] += a[(i + j) * step];
  }
  float sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
  for (; i < n; ++i) sum += a[i * step];
  return sum;
}

}  // namespace

void mix_to_mono(const float* interleaved, std::size_t frames, int channels, float* out) {
  if (channels == 1) {
    std::copy(interleaved, interleaved + frames, out);
    return;
  }
  const auto count = static_cast<float>(channels);
  for (std::size_t i = 0; i < frames; ++i) {
    out[i] = pairwise_sum(interleaved + i * static_cast<std::size_t>(channels), channels, 1) / count;
  }
}

Result<FrameRange> frame_range(const Crop& crop, int sample_rate) {
  const double start = crop.start.value_or(0.0);
  if (!std::isfinite(start) || start < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 "audio_start must be a number of seconds >= 0, not " + seconds_text(start));
  }
  // As librosa: int(offset * sr) frames skipped, int(duration * sr) read. Counts past any clip
  // (2^61 frames: 95,000 years at 768 kHz) are held at 2^61, so that first + count stays an
  // int64 and a start that far is past the clip's end, as any start beyond its length is.
  constexpr double kNoClipHolds = 2305843009213693952.0;  // 2^61
  const auto frames = [&](double seconds) {
    return static_cast<std::int64_t>(std::min(seconds * sample_rate, kNoClipHolds));
  };
  FrameRange range;
  range.first = frames(start);
  if (crop.end) {
    const double end = *crop.end;
    if (!std::isfinite(end) || end <= start) {
      return Error(ErrorCode::kInvalidArgument, "audio_end (" + seconds_text(end) +
                                                    " s) must come after audio_start (" + seconds_text(start) + " s)");
    }
    range.count = frames(end - start);
  }
  return range;
}

#if !MMFEED_VIDEO

Result<AudioInfo> probe(std::span<const std::byte>) {
  return Error(ErrorCode::kUnsupported, "audio files: this build has no FFmpeg (MMFEED_VIDEO=OFF); pass samples");
}
Result<AudioInfo> probe_header(std::span<const std::byte>, std::span<const std::byte>, std::uint64_t) {
  return Error(ErrorCode::kUnsupported, "audio files: this build has no FFmpeg (MMFEED_VIDEO=OFF); pass samples");
}
Result<Waveform> decode_mono(std::span<const std::byte>, const Crop&, const ClipLimits&, Route) {
  return Error(ErrorCode::kUnsupported, "audio files: this build has no FFmpeg (MMFEED_VIDEO=OFF); pass samples");
}

#else

namespace {

using media::av_message;

// The containers librosa reads with libsndfile (soundfile); others it hands to FFmpeg's command
// line (audioread), which writes 16-bit samples.
bool read_by_libsndfile(std::string_view demuxer) {
  for (std::string_view name : {"wav", "w64", "aiff", "au", "caf", "flac", "ogg", "mp3", "voc"}) {
    if (demuxer == name) return true;
  }
  return false;
}

// Containers whose stated length is exact (a header's sample count): a file holding fewer
// samples was cut short.
bool states_exact_length(std::string_view demuxer) {
  for (std::string_view name : {"wav", "w64", "aiff", "caf", "flac"}) {
    if (demuxer == name) return true;
  }
  return false;
}

// A RIFF/WAVE file whose data chunk states more bytes than the file holds was cut short (FFmpeg
// reads the rest as the whole clip). Sizes of 0 and from 0x7ffff000 up are what streaming writers
// leave when they cannot come back to fill them in: unknown, not a cut.
bool wav_cut_short(std::span<const std::byte> bytes) {
  const auto u32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint32_t>(bytes[at + static_cast<std::size_t>(i)]);
    return v;
  };
  const auto tag = [&](std::size_t at, const char* name) { return std::memcmp(bytes.data() + at, name, 4) == 0; };
  if (bytes.size() < 12 || !tag(0, "RIFF") || !tag(8, "WAVE")) return false;
  for (std::size_t at = 12; at + 8 <= bytes.size();) {
    const std::uint64_t size = u32(at + 4);
    if (tag(at, "data")) return size != 0 && size < 0x7ffff000 && at + 8 + size > bytes.size();
    at += 8 + size + (size & 1);
  }
  return false;
}

struct Stream {
  std::unique_ptr<media::MediaFile> file;
  int index = -1;
  const AVCodec* codec = nullptr;
  AVStream* stream = nullptr;
  int sample_rate = 0;
  int channels = 0;
  double stated_seconds = 0;
  std::string demuxer;
  bool via_int16 = false;  // the samples through FFmpeg's 16-bit conversion (see to_float)
};

// The audio stream of `file` (opened), as `route` decodes it.
Result<Stream> open_stream(Result<std::unique_ptr<media::MediaFile> > file, Route route) {
  if (!file.ok()) return std::move(file).error();
  Stream s;
  s.file = std::move(*file);
  AVFormatContext* format = s.file->format();
  s.demuxer = format->iformat->name;
  s.via_int16 = route == Route::kSoundtrack || !read_by_libsndfile(s.demuxer);
  // Headers that state the codec, rate and channels need no packets read ahead.
  const bool header_complete = format->nb_streams == 1 && states_exact_length(s.demuxer) &&
                               format->streams[0]->codecpar->sample_rate > 0 &&
                               format->streams[0]->codecpar->ch_layout.nb_channels > 0;
  if (!header_complete) {
    if (Status st = s.file->find_stream_info(); !st.ok()) return std::move(st).error();
  }
  const int any = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, nullptr, 0);
  if (any < 0) return Error(ErrorCode::kNotFound, "audio: the file holds no audio stream");
  s.index = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, &s.codec, 0);
  if (s.index < 0 || s.codec == nullptr) {
    return Error(ErrorCode::kUnsupported, std::string("audio: no decoder for codec '") +
                                              avcodec_get_name(format->streams[any]->codecpar->codec_id) +
                                              "' in this FFmpeg");
  }
  s.stream = format->streams[s.index];
  // libsndfile decodes Opus with libopus: so does FFmpeg's wrapper of it, where FFmpeg's own
  // decoder (the one its command line, librosa's fallback, uses) rounds differently.
  if (s.stream->codecpar->codec_id == AV_CODEC_ID_OPUS && !s.via_int16) {
    if (const AVCodec* libopus = avcodec_find_decoder_by_name("libopus")) s.codec = libopus;
  }
  s.sample_rate = s.stream->codecpar->sample_rate;
  s.channels = s.stream->codecpar->ch_layout.nb_channels;
  if (s.sample_rate <= 0 || s.sample_rate > kMaxSampleRate) {
    return Error(ErrorCode::kUnsupported, "audio: a sample rate of " + std::to_string(s.sample_rate) + " Hz (1 to " +
                                              std::to_string(kMaxSampleRate) + " taken)");
  }
  if (s.channels <= 0 || s.channels > kMaxChannels) {
    return Error(ErrorCode::kUnsupported, "audio: " + std::to_string(s.channels) + " channels (1 to " +
                                              std::to_string(kMaxChannels) + " taken)");
  }
  if (s.stream->duration > 0) {
    s.stated_seconds = static_cast<double>(s.stream->duration) * av_q2d(s.stream->time_base);
  } else if (format->duration > 0) {
    s.stated_seconds = static_cast<double>(format->duration) / AV_TIME_BASE;
  }
  return s;
}

// One decoded frame's samples, interleaved, as librosa gets them: libsndfile's scaling of each
// format, or (`via_int16`) FFmpeg's conversion to 16 bits (libswresample's rounding and
// truncation) and numpy's 1/32768.
void to_float(const AVFrame* frame, int channels, bool via_int16, std::vector<float>& out) {
  const auto format = static_cast<AVSampleFormat>(frame->format);
  const bool planar = av_sample_fmt_is_planar(format) != 0;
  const int n = frame->nb_samples;
  out.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(channels));
  const AVSampleFormat packed = av_get_packed_sample_fmt(format);
  for (int c = 0; c < channels; ++c) {
    const std::uint8_t* base = planar ? frame->extended_data[c] : frame->extended_data[0];
    const int step = planar ? 1 : channels;
    const int offset = planar ? 0 : c;
    float* o = out.data() + c;
    for (int i = 0; i < n; ++i) {
      const int at = i * step + offset;
      float v = 0;
      if (via_int16) {
        int s16 = 0;
        switch (packed) {
          case AV_SAMPLE_FMT_U8: s16 = (base[at] - 0x80) * 256; break;
          case AV_SAMPLE_FMT_S16: s16 = reinterpret_cast<const std::int16_t*>(base)[at]; break;
          case AV_SAMPLE_FMT_S32: s16 = reinterpret_cast<const std::int32_t*>(base)[at] >> 16; break;
          case AV_SAMPLE_FMT_S64: s16 = static_cast<int>(reinterpret_cast<const std::int64_t*>(base)[at] >> 48); break;
          case AV_SAMPLE_FMT_FLT:
            s16 = av_clip_int16(static_cast<int>(std::lrintf(reinterpret_cast<const float*>(base)[at] * (1 << 15))));
            break;
          case AV_SAMPLE_FMT_DBL:
            s16 = av_clip_int16(static_cast<int>(std::lrint(reinterpret_cast<const double*>(base)[at] * (1 << 15))));
            break;
          default: break;
        }
        v = static_cast<float>(s16) * (1.0f / 32768.0f);
      } else {
        switch (packed) {
          case AV_SAMPLE_FMT_U8: v = static_cast<float>(base[at] - 0x80) * (1.0f / 128.0f); break;
          case AV_SAMPLE_FMT_S16:
            v = static_cast<float>(reinterpret_cast<const std::int16_t*>(base)[at]) * (1.0f / 32768.0f);
            break;
          case AV_SAMPLE_FMT_S32:
            v = static_cast<float>(reinterpret_cast<const std::int32_t*>(base)[at]) * (1.0f / 2147483648.0f);
            break;
          case AV_SAMPLE_FMT_S64:
            v = static_cast<float>(reinterpret_cast<const std::int64_t*>(base)[at]) * (1.0f / 9223372036854775808.0f);
            break;
          case AV_SAMPLE_FMT_FLT: v = reinterpret_cast<const float*>(base)[at]; break;
          case AV_SAMPLE_FMT_DBL: v = static_cast<float>(reinterpret_cast<const double*>(base)[at]); break;
          default: break;
        }
      }
      o[static_cast<std::size_t>(i) * static_cast<std::size_t>(channels)] = v;
    }
  }
}

bool known_format(int format) {
  switch (av_get_packed_sample_fmt(static_cast<AVSampleFormat>(format))) {
    case AV_SAMPLE_FMT_U8:
    case AV_SAMPLE_FMT_S16:
    case AV_SAMPLE_FMT_S32:
    case AV_SAMPLE_FMT_S64:
    case AV_SAMPLE_FMT_FLT:
    case AV_SAMPLE_FMT_DBL: return true;
    default: return false;
  }
}

Result<Stream> open_stream(std::span<const std::byte> bytes, Route route) {
  return open_stream(media::MediaFile::open(bytes, "audio", /*probe_packets=*/false), route);
}

AudioInfo info_of(const Stream& s) {
  AudioInfo info;
  info.sample_rate = s.sample_rate;
  info.channels = s.channels;
  info.duration_s = s.stated_seconds;
  info.codec = avcodec_get_name(s.stream->codecpar->codec_id);
  info.container = s.demuxer;
  return info;
}

}  // namespace

Result<AudioInfo> probe(std::span<const std::byte> bytes) {
  auto opened = open_stream(bytes, Route::kLibrosa);
  if (!opened.ok()) return std::move(opened).error();
  return info_of(*opened);
}

Result<AudioInfo> probe_header(std::span<const std::byte> head, std::span<const std::byte> tail, std::uint64_t size) {
  auto opened =
      open_stream(media::MediaFile::open_parts(head, tail, static_cast<std::int64_t>(size), "audio"), Route::kLibrosa);
  if (!opened.ok()) return std::move(opened).error();
  // A length guessed from the bit rate where the file's end would state it (an Ogg file's last
  // page): its end is needed, as the whole file's probe reads it.
  if (tail.empty() && head.size() < size &&
      opened->file->format()->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE) {
    return Error(ErrorCode::kUnavailable, "audio: its length is stated at its end");
  }
  return info_of(*opened);
}

namespace {

// One decode_mono call over an opened stream: the frames it may hold, and what it has taken.
class MonoDecode {
 public:
  MonoDecode(const Stream& s, FrameRange range, const ClipLimits& limits)
      : s_(s),
        range_(range),
        limits_(limits),
        by_seconds_(static_cast<std::int64_t>(std::min(limits.max_seconds * s.sample_rate, 9.2e18))),  // in int64
        limit_(std::min(by_seconds_, static_cast<std::int64_t>(std::min<std::uint64_t>(
                                         limits.max_bytes / sizeof(float), static_cast<std::uint64_t>(INT64_MAX))))),
        stated_(static_cast<std::int64_t>(s.stated_seconds * s.sample_rate)),
        end_(range.count >= 0 ? range.first + range.count : INT64_MAX) {}

  // The frames the crop will hold, as far as the container says (0: it does not say).
  std::int64_t planned() const {
    std::int64_t planned = std::max<std::int64_t>(stated_ - range_.first, 0);
    if (range_.count >= 0) planned = stated_ > 0 ? std::min(range_.count, planned) : range_.count;
    return planned;
  }
  // The frames a clip may hold: max_seconds of them, and no more than max_bytes of samples.
  std::int64_t limit() const { return limit_; }

  Error too_long(std::int64_t frames) const {
    const std::string seconds = seconds_text(static_cast<double>(frames) / s_.sample_rate);
    if (frames > by_seconds_) {
      return Error(ErrorCode::kResourceExhausted, "audio: " + seconds + " s to load, over the limit of " +
                                                      seconds_text(limits_.max_seconds) + " s (max_seconds)");
    }
    return Error(ErrorCode::kResourceExhausted,
                 "audio: " + seconds + " s at " + std::to_string(s_.sample_rate) + " Hz are " +
                     std::to_string(static_cast<std::uint64_t>(frames) * sizeof(float)) +
                     " bytes of samples, more than the " + std::to_string(limits_.max_bytes) + " a clip may hold");
  }

  // Every packet of the stream through `decoder` until the crop's end, then the waveform.
  Result<Waveform> run(AVCodecContext* decoder, AVPacket* packet, AVFrame* frame) {
    out_.sample_rate = s_.sample_rate;
    out_.samples.reserve(static_cast<std::size_t>(std::clamp<std::int64_t>(planned(), 0, limit_)));
    int status = 0;
    while (position_ < end_ && (status = av_read_frame(s_.file->format(), packet)) >= 0) {
      if (packet->stream_index == s_.index) {
        const int sent = avcodec_send_packet(decoder, packet);
        av_packet_unref(packet);
        if (sent < 0 && sent != AVERROR(EAGAIN)) return broken(sent);
        if (Status st = drain(decoder, frame); !st.ok()) return st.error();
      } else {
        av_packet_unref(packet);
      }
    }
    if (position_ < end_) {
      if (status < 0 && status != AVERROR_EOF) {
        return Error(ErrorCode::kCorruptData, "audio: the container is damaged (" + av_message(status) + ")");
      }
      avcodec_send_packet(decoder, nullptr);
      if (Status st = drain(decoder, frame); !st.ok()) return st.error();
      if (states_exact_length(s_.demuxer) && stated_ > 0 && position_ < stated_) return broken(AVERROR_EOF);
    }
    if (!finite_) return Error(ErrorCode::kCorruptData, "audio: the samples are not finite everywhere (NaN or Inf)");
    if (out_.samples.empty()) {
      return Error(ErrorCode::kCorruptData, range_.first > 0 && position_ > 0
                                                ? "audio: audio_start is past the clip's end (" +
                                                      seconds_text(static_cast<double>(position_) / s_.sample_rate) +
                                                      " s)"
                                                : "audio: the stream holds no samples");
    }
    return std::move(out_);
  }

 private:
  // The frame's samples within the crop, mixed to mono onto the waveform.
  Status take(AVFrame* f) {
    if (f->sample_rate != s_.sample_rate || f->ch_layout.nb_channels != s_.channels) {
      return Error(ErrorCode::kUnsupported, "audio: the stream changes its sample rate or channels midway");
    }
    if (!known_format(f->format)) {
      return Error(ErrorCode::kUnsupported, std::string("audio: sample format ") +
                                                av_get_sample_fmt_name(static_cast<AVSampleFormat>(f->format)));
    }
    const std::int64_t from = std::max(range_.first, position_);
    const std::int64_t to = std::min(end_, position_ + f->nb_samples);
    if (to > from) {
      const std::int64_t held = static_cast<std::int64_t>(out_.samples.size()) + (to - from);
      if (held > limit_) return too_long(held);
      // Grown as a vector grows, but never past the limit: what is held stays what was checked.
      if (static_cast<std::size_t>(held) > out_.samples.capacity()) {
        const auto doubled = static_cast<std::int64_t>(2 * out_.samples.capacity());
        out_.samples.reserve(static_cast<std::size_t>(std::min(limit_, std::max(held, doubled))));
      }
      to_float(f, s_.channels, s_.via_int16, interleaved_);
      const std::size_t first = out_.samples.size();
      out_.samples.resize(first + static_cast<std::size_t>(to - from));
      mix_to_mono(
          interleaved_.data() + static_cast<std::size_t>(from - position_) * static_cast<std::size_t>(s_.channels),
          static_cast<std::size_t>(to - from), s_.channels, out_.samples.data() + first);
      for (std::size_t i = first; i < out_.samples.size(); ++i) finite_ = finite_ && std::isfinite(out_.samples[i]);
    }
    position_ += f->nb_samples;
    return ok_status();
  }

  // A decoding error in a container stating its exact length, before that length: cut short.
  Error broken(int status) const {
    if (states_exact_length(s_.demuxer) && stated_ > 0 && position_ < stated_) {
      return Error(ErrorCode::kCorruptData, "audio: truncated: the container states " + std::to_string(stated_) +
                                                " frames, the file holds " + std::to_string(position_));
    }
    return Error(ErrorCode::kCorruptData,
                 "audio: the " + std::string(s_.codec->name) + " stream does not decode (" + av_message(status) + ")");
  }

  // Every frame the decoder has ready.
  Status drain(AVCodecContext* decoder, AVFrame* frame) {
    int status = 0;
    while ((status = avcodec_receive_frame(decoder, frame)) >= 0) {
      Status st = take(frame);
      av_frame_unref(frame);
      if (!st.ok()) return st;
    }
    if (status != AVERROR(EAGAIN) && status != AVERROR_EOF) return broken(status);
    return ok_status();
  }

  const Stream& s_;
  const FrameRange range_;
  const ClipLimits& limits_;
  const std::int64_t by_seconds_;  // max_seconds' frames
  const std::int64_t limit_;
  const std::int64_t stated_;  // the frames the container states (0: it does not say)
  const std::int64_t end_;     // the crop's end frame
  std::int64_t position_ = 0;  // frames decoded so far
  std::vector<float> interleaved_;
  bool finite_ = true;
  Waveform out_;
};

}  // namespace

Result<Waveform> decode_mono(std::span<const std::byte> bytes, const Crop& crop, const ClipLimits& limits,
                             Route route) {
  auto opened = open_stream(bytes, route);
  if (!opened.ok()) return std::move(opened).error();
  const Stream& s = *opened;
  auto range = frame_range(crop, s.sample_rate);
  if (!range.ok()) return std::move(range).error();
  MonoDecode decode(s, *range, limits);
  if (decode.planned() > decode.limit()) return decode.too_long(decode.planned());
  auto decoder = media::open_decoder(s.stream, s.codec, "audio");
  if (!decoder.ok()) return std::move(decoder).error();
  media::PacketPtr packet(av_packet_alloc());
  media::FramePtr frame(av_frame_alloc());
  if (!packet || !frame) return Error(ErrorCode::kResourceExhausted, "audio: cannot allocate a packet");
  if (s.demuxer == "wav" && wav_cut_short(bytes)) {
    return Error(ErrorCode::kCorruptData, "audio: truncated: the WAV data chunk states more bytes than the file holds");
  }
  return decode.run(decoder->get(), packet.get(), frame.get());
}

#endif

}  // namespace mmfeed::audio
