#include "vision/video.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#if MMFEED_VIDEO
#include "media/ffmpeg.h"
extern "C" {
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}
#endif

namespace mmfeed::vision {

#if !MMFEED_VIDEO

bool video_supported() { return false; }
std::string ffmpeg_version() { return {}; }
std::string video_libraries() { return "none (built with MMFEED_VIDEO=OFF)"; }

namespace {
Error no_video() {
  return Error(ErrorCode::kUnsupported, "this build of mmfeed has no video support (built with MMFEED_VIDEO=OFF)");
}
}  // namespace

Result<VideoInfo> probe_video(std::span<const std::byte>, const VideoLimits&) { return no_video(); }
Result<VideoInfo> probe_video_header(std::span<const std::byte>, std::span<const std::byte>, std::uint64_t,
                                     const VideoLimits&) {
  return no_video();
}
Status for_each_video_frame(std::span<const std::byte>, std::span<const std::int64_t>, const VideoLimits&,
                            const VideoFrameSink&) {
  return no_video();
}

#else

bool video_supported() { return true; }
std::string ffmpeg_version() { return av_version_info(); }

std::string video_libraries() {
  auto version = [](unsigned v) {
    return std::to_string(AV_VERSION_MAJOR(v)) + "." + std::to_string(AV_VERSION_MINOR(v)) + "." +
           std::to_string(AV_VERSION_MICRO(v));
  };
  return "libavformat " + version(avformat_version()) + ", libavcodec " + version(avcodec_version()) + ", libswscale " +
         version(swscale_version());
}

namespace {

using media::av_message;
using media::FrameCloser;
using media::PacketCloser;
using media::PacketPtr;

struct ScaleCloser {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

Status check_frame_size(int width, int height, const VideoLimits& limits) {
  if (width <= 0 || height <= 0) return Error(ErrorCode::kCorruptData, "video: the stream declares no frame size");
  if (static_cast<std::int64_t>(width) * height > limits.max_frame_pixels) {
    return Error(ErrorCode::kResourceExhausted, "video: frames of " + std::to_string(width) + "x" +
                                                    std::to_string(height) + " exceed the limit of " +
                                                    std::to_string(limits.max_frame_pixels) + " pixels");
  }
  return ok_status();
}

// An opened container and its best video stream, whose frame size is within the limits.
class Container {
 public:
  static Result<std::unique_ptr<Container> > open(std::span<const std::byte> bytes, const VideoLimits& limits) {
    auto c = std::unique_ptr<Container>(new Container);
    auto file = media::MediaFile::open(bytes, "video");
    if (!file.ok()) return std::move(file).error();
    c->file_ = std::move(*file);
    if (Status st = c->file_->find_stream_info(); !st.ok()) return std::move(st).error();
    AVFormatContext* format = c->file_->format();
    const int any = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (any < 0) return Error(ErrorCode::kCorruptData, "video: the file holds no video stream");
    const AVCodec* codec = nullptr;
    c->stream_ = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    const AVCodecParameters* parameters = format->streams[any]->codecpar;
    if (c->stream_ < 0 || codec == nullptr) {
      return Error(ErrorCode::kUnsupported, std::string("video: no decoder for codec '") +
                                                avcodec_get_name(parameters->codec_id) + "' in this FFmpeg");
    }
    c->codec_ = codec;
    if (Status st = check_frame_size(c->width(), c->height(), limits); !st.ok()) return std::move(st).error();
    return c;
  }

  AVFormatContext* format() { return file_->format(); }
  AVStream* stream() { return format()->streams[stream_]; }
  int width() { return stream()->codecpar->width; }
  int height() { return stream()->codecpar->height; }
  int stream_index() const { return stream_; }
  const AVCodec* codec() const { return codec_; }

 private:
  Container() = default;
  std::unique_ptr<media::MediaFile> file_;
  int stream_ = -1;
  const AVCodec* codec_ = nullptr;
};

int rotation_of(AVStream* stream) {
  std::size_t size = 0;
  const std::uint8_t* matrix = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (matrix == nullptr || size < 9 * sizeof(std::int32_t)) return 0;
  const double degrees = av_display_rotation_get(reinterpret_cast<const std::int32_t*>(matrix));
  const int rounded = static_cast<int>(std::lround(degrees)) % 360;
  return rounded < 0 ? rounded + 360 : rounded;
}

}  // namespace

// A container that declares its frame count (MP4, MOV, AVI do) but holds fewer packets was cut
// short: refused, rather than read as the shorter clip that is left. (Matroska and WebM declare
// no count; one cut between clusters reads as the frames it holds.)
Status check_not_cut(const AVStream* stream, std::int64_t packets) {
  if (stream->nb_frames > 0 && packets < stream->nb_frames) {
    return Error(ErrorCode::kCorruptData, "video: truncated: the container declares " +
                                              std::to_string(stream->nb_frames) + " frames, the file holds " +
                                              std::to_string(packets));
  }
  return ok_status();
}

Result<VideoInfo> probe_video(std::span<const std::byte> bytes, const VideoLimits& limits) {
  auto opened = Container::open(bytes, limits);
  if (!opened.ok()) return std::move(opened).error();
  Container& c = **opened;
  AVStream* stream = c.stream();
  VideoInfo info;
  info.width = c.width();
  info.height = c.height();
  info.codec = avcodec_get_name(stream->codecpar->codec_id);
  info.rotation = rotation_of(stream);
  const AVRational rate = stream->avg_frame_rate.num > 0 ? stream->avg_frame_rate : stream->r_frame_rate;
  info.fps = rate.den > 0 ? av_q2d(rate) : 0;
  // Count the stream's packets: exact where the container's frame count is missing or wrong.
  std::unique_ptr<AVPacket, PacketCloser> packet(av_packet_alloc());
  if (!packet) return Error(ErrorCode::kResourceExhausted, "video: cannot allocate a packet");
  std::int64_t frames = 0, packets = 0;
  int status = 0;
  while ((status = av_read_frame(c.format(), packet.get())) >= 0) {
    if (packet->stream_index == c.stream_index() && packet->size > 0) {
      ++packets;
      // A packet flagged for discarding (before an edit list's start) decodes to no frame.
      if (!(packet->flags & AV_PKT_FLAG_DISCARD)) ++frames;
    }
    av_packet_unref(packet.get());
    if (frames > limits.max_frames) {
      return Error(ErrorCode::kResourceExhausted,
                   "video: more than " + std::to_string(limits.max_frames) + " frames (the limit)");
    }
  }
  if (status != AVERROR_EOF)
    return Error(ErrorCode::kCorruptData, "video: the container is damaged (" + av_message(status) + ")");
  if (Status st = check_not_cut(stream, packets); !st.ok()) return st.error();
  if (frames == 0) return Error(ErrorCode::kCorruptData, "video: the stream holds no frames");
  if (info.fps <= 0) return Error(ErrorCode::kCorruptData, "video: the stream declares no frame rate");
  info.frames = frames;
  info.duration_s = static_cast<double>(frames) / info.fps;
  return info;
}

Result<VideoInfo> probe_video_header(std::span<const std::byte> head, std::span<const std::byte> tail,
                                     std::uint64_t size, const VideoLimits& limits) {
  auto file = media::MediaFile::open_parts(head, tail, static_cast<std::int64_t>(size), "video");
  if (!file.ok()) return std::move(file).error();
  AVFormatContext* format = (*file)->format();
  AVStream* stream = nullptr;  // the first video stream that is no cover picture
  for (unsigned i = 0; i < format->nb_streams && stream == nullptr; ++i) {
    AVStream* s = format->streams[i];
    if (s->codecpar->codec_type == AVMEDIA_TYPE_VIDEO && !(s->disposition & AV_DISPOSITION_ATTACHED_PIC)) stream = s;
  }
  if (stream == nullptr) return Error(ErrorCode::kCorruptData, "video: its header names no video stream");
  VideoInfo info;
  info.width = stream->codecpar->width;
  info.height = stream->codecpar->height;
  if (Status st = check_frame_size(info.width, info.height, limits); !st.ok()) return st.error();
  info.codec = avcodec_get_name(stream->codecpar->codec_id);
  info.rotation = rotation_of(stream);
  const AVRational rate = stream->avg_frame_rate.num > 0 ? stream->avg_frame_rate : stream->r_frame_rate;
  info.fps = rate.den > 0 ? av_q2d(rate) : 0;
  if (info.fps <= 0) return Error(ErrorCode::kCorruptData, "video: its header states no frame rate");
  // The frames the header counts (MP4, MOV), else its duration's (Matroska states none).
  double seconds = stream->duration > 0 ? static_cast<double>(stream->duration) * av_q2d(stream->time_base) : 0;
  if (seconds <= 0 && format->duration > 0) seconds = static_cast<double>(format->duration) / AV_TIME_BASE;
  info.frames = stream->nb_frames > 0 ? stream->nb_frames : std::llround(seconds * info.fps);
  if (info.frames <= 0) return Error(ErrorCode::kCorruptData, "video: its header states neither frames nor duration");
  if (info.frames > limits.max_frames) {
    return Error(ErrorCode::kResourceExhausted,
                 "video: more than " + std::to_string(limits.max_frames) + " frames (the limit)");
  }
  info.duration_s = static_cast<double>(info.frames) / info.fps;
  return info;
}

namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

// The stream's packets, in decoding order (the file is in memory already; so are they now).
// `damage`: why the container could not be read to its end (empty when it was).
Result<std::vector<PacketPtr> > read_packets(Container& c, const VideoLimits& limits, std::string& damage) {
  std::vector<PacketPtr> packets;
  PacketPtr packet(av_packet_alloc());
  if (!packet) return Error(ErrorCode::kResourceExhausted, "video: cannot allocate a packet");
  int status = 0;
  while ((status = av_read_frame(c.format(), packet.get())) >= 0) {
    if (packet->stream_index == c.stream_index() && packet->size > 0) {
      if (static_cast<std::int64_t>(packets.size()) >= limits.max_frames) {
        return Error(ErrorCode::kResourceExhausted,
                     "video: more than " + std::to_string(limits.max_frames) + " frames (the limit)");
      }
      packets.emplace_back(av_packet_alloc());
      if (!packets.back()) return Error(ErrorCode::kResourceExhausted, "video: cannot allocate a packet");
      av_packet_move_ref(packets.back().get(), packet.get());
    } else {
      av_packet_unref(packet.get());
    }
  }
  if (status != AVERROR_EOF) damage = av_message(status);
  return packets;
}

// Each packet's place in presentation order, from the order of the timestamps, when every
// packet has its own: the decoder may then drop the frames nobody asked for that no other frame
// refers to (AVDISCARD_NONREF), and a frame is known by its timestamp. Otherwise (`place` empty)
// every frame is decoded and counted as it comes.
struct Places {
  std::unordered_map<std::int64_t, std::int64_t> place;  // timestamp -> rank in presentation order
  std::int64_t shown = 0;                                // the frames the packets decode to, when placed
};

Places place_by_timestamps(const std::vector<PacketPtr>& packets) {
  Places out;
  std::vector<std::int64_t> order;  // of the packets that decode to a frame (not flagged discard)
  order.reserve(packets.size());
  bool timed = true;
  for (const auto& p : packets) {
    if (p->pts == AV_NOPTS_VALUE) timed = false;
    if (!(p->flags & AV_PKT_FLAG_DISCARD)) order.push_back(p->pts);
  }
  std::sort(order.begin(), order.end());
  if (timed && std::adjacent_find(order.begin(), order.end()) == order.end()) {
    for (std::size_t i = 0; i < order.size(); ++i) out.place[order[i]] = static_cast<std::int64_t>(i);
    out.shown = static_cast<std::int64_t>(order.size());
  }
  return out;
}

// For skipping ahead: each frame's packet, the last keyframe at or before each packet, and how
// many packets of frames asked for come before each packet.
struct SkipIndex {
  std::vector<std::size_t> packet_of_rank, last_key, wanted_before;
};

SkipIndex skip_index(const std::vector<PacketPtr>& packets, const Places& places,
                     std::span<const std::int64_t> indices) {
  SkipIndex out{std::vector<std::size_t>(static_cast<std::size_t>(places.shown), kNone),
                std::vector<std::size_t>(packets.size(), kNone), std::vector<std::size_t>(packets.size() + 1, 0)};
  if (places.place.empty()) return out;
  std::vector<bool> asked(static_cast<std::size_t>(places.shown), false);
  for (std::int64_t i : indices) {
    if (i < places.shown) asked[static_cast<std::size_t>(i)] = true;
  }
  std::size_t key = kNone;
  for (std::size_t i = 0; i < packets.size(); ++i) {
    const AVPacket* p = packets[i].get();
    if (p->flags & AV_PKT_FLAG_KEY) key = i;
    out.last_key[i] = key;
    bool asked_here = false;
    if (!(p->flags & AV_PKT_FLAG_DISCARD)) {
      const auto rank = static_cast<std::size_t>(places.place.at(p->pts));
      out.packet_of_rank[rank] = i;
      asked_here = asked[rank];
    }
    out.wanted_before[i + 1] = out.wanted_before[i] + (asked_here ? 1 : 0);
  }
  return out;
}

// Decoded frames to RGB rows of the stream's size, handed to the sink.
class RgbConverter {
 public:
  RgbConverter(int width, int height)
      : width_(width),
        height_(height),
        row_(static_cast<std::size_t>(width) * 3),
        scratch_stride_((row_ + 63) / 64 * 64),
        scratch_(scratch_stride_ * (static_cast<std::size_t>(height) + 1)),
        rgb_(row_ * static_cast<std::size_t>(height)) {}

  // Converts `frame` and hands it to the sink as indices[k].
  Status keep(const AVFrame* frame, std::size_t k, const VideoFrameSink& sink) {
    const auto format = static_cast<AVPixelFormat>(frame->format);
    scale_.reset(sws_getCachedContext(scale_.release(), width_, height_, format, width_, height_, AV_PIX_FMT_RGB24,
                                      SWS_BILINEAR, nullptr, nullptr, nullptr));
    if (!scale_)
      return Error(ErrorCode::kUnsupported,
                   std::string("video: cannot convert pixel format ") + av_get_pix_fmt_name(format) + " to RGB");
    const int matrix = frame->colorspace == AVCOL_SPC_BT709 ? SWS_CS_ITU709 : SWS_CS_ITU601;
    const int full_range = frame->color_range == AVCOL_RANGE_JPEG || format == AV_PIX_FMT_YUVJ420P ||
                           format == AV_PIX_FMT_YUVJ422P || format == AV_PIX_FMT_YUVJ444P;
    const int* coefficients = sws_getCoefficients(matrix);
    sws_setColorspaceDetails(scale_.get(), coefficients, full_range, coefficients, 1, 0, 1 << 16, 1 << 16);
    // libswscale's SIMD writes past the end of a row (8 bytes at a time): convert into rows of
    // aligned stride with a spare row, then copy the rows out.
    std::uint8_t* target[4] = {scratch_.data(), nullptr, nullptr, nullptr};
    const int stride[4] = {static_cast<int>(scratch_stride_), 0, 0, 0};
    sws_scale(scale_.get(), frame->data, frame->linesize, 0, height_, target, stride);
    for (int y = 0; y < height_; ++y) {
      std::memcpy(rgb_.data() + static_cast<std::size_t>(y) * row_,
                  scratch_.data() + static_cast<std::size_t>(y) * scratch_stride_, row_);
    }
    return sink(k, rgb_.data(), width_, height_);
  }

 private:
  const int width_, height_;
  const std::size_t row_, scratch_stride_;
  std::vector<std::uint8_t> scratch_, rgb_;
  std::unique_ptr<SwsContext, ScaleCloser> scale_;
};

// One pass over the packets. `by_time`: frames known by timestamp, the unwanted unreferenced
// ones dropped, and a jump to the keyframe before the next frame asked for when nothing asked for
// lies between. After run(): frames_seen (the frames that came out), kept (indices filled, in
// order), consistent (false when a frame's timestamp was not a packet's, or a frame asked for did
// not come out where its timestamp says: a by_time pass then stops, for a counting pass).
class DecodePass {
 public:
  DecodePass(Container& c, const std::vector<PacketPtr>& packets, const Places& places, const SkipIndex& skip,
             std::span<const std::int64_t> indices, RgbConverter& rgb, const VideoFrameSink& sink, std::string& damage)
      : c_(c),
        packets_(packets),
        places_(places),
        skip_(skip),
        indices_(indices),
        rgb_(rgb),
        sink_(sink),
        damage_(damage) {}

  std::int64_t frames_seen = 0;
  std::size_t kept = 0;
  bool consistent = true;

  Status run(bool by_time, AVFrame* frame) {
    by_time_ = by_time;
    frame_ = frame;
    frames_seen = 0;
    kept = 0;
    consistent = true;
    auto decoder = media::open_decoder(c_.stream(), c_.codec(), "video");
    if (!decoder.ok()) return std::move(decoder).error();
    decoder_ = std::move(*decoder);
    wanted_.assign(static_cast<std::size_t>(places_.shown), false);
    for (std::int64_t i : indices_) {
      if (i < places_.shown) wanted_[static_cast<std::size_t>(i)] = true;
    }
    bool more = true;
    for (std::size_t i = 0; more && i < packets_.size(); ++i) {
      if (by_time_ && kept < indices_.size() && indices_[kept] < places_.shown) {
        // The next frame asked for decodes from the last keyframe before it: when that keyframe
        // lies ahead and nothing asked for is in between, the packets in between are not needed.
        // What the decoder holds comes out first.
        const std::size_t key = skip_.last_key[skip_.packet_of_rank[static_cast<std::size_t>(indices_[kept])]];
        if (key != kNone && key > i && skip_.wanted_before[key] == skip_.wanted_before[i]) {
          avcodec_send_packet(decoder_.get(), nullptr);
          auto drained = drain();
          if (!drained.ok()) return std::move(drained).error();
          if (!*drained || !consistent) break;
          avcodec_flush_buffers(decoder_.get());
          i = key;
        }
      }
      AVPacket* p = packets_[i].get();
      if (by_time_) {
        const auto it = places_.place.find(p->pts);
        const bool needed = !(p->flags & AV_PKT_FLAG_DISCARD) && it != places_.place.end() &&
                            wanted_[static_cast<std::size_t>(it->second)];
        decoder_->skip_frame = needed ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
      }
      const int sent = avcodec_send_packet(decoder_.get(), p);
      if (sent < 0 && sent != AVERROR(EAGAIN)) {
        if (damage_.empty()) damage_ = av_message(sent);
        break;  // keep what was decoded; a frame asked for beyond the damage is reported below
      }
      auto drained = drain();
      if (!drained.ok()) return std::move(drained).error();
      more = *drained && consistent;
    }
    if (more) {
      avcodec_send_packet(decoder_.get(), nullptr);  // the frames the decoder still holds
      auto drained = drain();
      if (!drained.ok()) return std::move(drained).error();
    }
    return ok_status();
  }

 private:
  // Takes what the decoder has ready; false once every frame asked for is kept.
  Result<bool> drain() {
    while (true) {
      const int status = avcodec_receive_frame(decoder_.get(), frame_);
      if (status == AVERROR(EAGAIN) || status == AVERROR_EOF) return true;
      if (status < 0)
        return Error(ErrorCode::kCorruptData,
                     "video: frame " + std::to_string(frames_seen) + " does not decode (" + av_message(status) + ")");
      if (frame_->width != c_.width() || frame_->height != c_.height()) {
        return Error(ErrorCode::kUnsupported, "video: the frame size changes mid-stream (" +
                                                  std::to_string(frame_->width) + "x" + std::to_string(frame_->height) +
                                                  " at frame " + std::to_string(frames_seen) + ")");
      }
      std::int64_t at = frames_seen;
      if (by_time_) {
        const auto it = places_.place.find(frame_->pts);
        if (it == places_.place.end() || it->second < at) {
          consistent = false;
          return false;
        }
        at = it->second;
      }
      if (by_time_ && kept < indices_.size() && indices_[kept] < at) {
        consistent = false;  // a frame asked for did not come out where its timestamp says
        return false;
      }
      while (kept < indices_.size() && indices_[kept] == at) {
        if (Status st = rgb_.keep(frame_, kept, sink_); !st.ok()) return std::move(st).error();
        ++kept;
      }
      frames_seen = at + 1;
      av_frame_unref(frame_);
      if (kept == indices_.size()) return false;
    }
  }

  Container& c_;
  const std::vector<PacketPtr>& packets_;
  const Places& places_;
  const SkipIndex& skip_;
  const std::span<const std::int64_t> indices_;
  RgbConverter& rgb_;
  const VideoFrameSink& sink_;
  std::string& damage_;
  bool by_time_ = false;
  AVFrame* frame_ = nullptr;
  std::vector<bool> wanted_;
  std::unique_ptr<AVCodecContext, media::CodecCloser> decoder_;
};

}  // namespace

Status for_each_video_frame(std::span<const std::byte> bytes, std::span<const std::int64_t> indices,
                            const VideoLimits& limits, const VideoFrameSink& sink) {
  if (indices.empty()) return Error(ErrorCode::kInvalidArgument, "video: no frames asked for");
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || (i > 0 && indices[i] < indices[i - 1])) {
      return Error(ErrorCode::kInvalidArgument, "video: frame indices must be ascending and not negative");
    }
  }
  auto opened = Container::open(bytes, limits);
  if (!opened.ok()) return std::move(opened).error();
  Container& c = **opened;
  std::string damage;
  auto packets = read_packets(c, limits, damage);
  if (!packets.ok()) return std::move(packets).error();
  if (Status st = check_not_cut(c.stream(), static_cast<std::int64_t>(packets->size())); !st.ok()) return st;
  const Places places = place_by_timestamps(*packets);
  const SkipIndex skip = skip_index(*packets, places, indices);

  std::unique_ptr<AVFrame, FrameCloser> frame(av_frame_alloc());
  if (!frame) return Error(ErrorCode::kResourceExhausted, "video: cannot allocate a frame");
  RgbConverter rgb(c.width(), c.height());
  DecodePass pass(c, *packets, places, skip, indices, rgb, sink, damage);
  if (!places.place.empty()) {
    if (Status st = pass.run(true, frame.get()); !st.ok()) return std::move(st).error();
  }
  if (places.place.empty() || !pass.consistent) {  // no usable timestamps: every frame, counted
    if (Status st = pass.run(false, frame.get()); !st.ok()) return std::move(st).error();
  }
  const std::size_t kept = pass.kept;
  if (kept < indices.size()) {
    // The stream's frames: its packets when they were placed by timestamp, else those that came out.
    const std::int64_t frames = pass.consistent && !places.place.empty() ? places.shown : pass.frames_seen;
    const std::string suffix = damage.empty() ? "" : " (damaged: " + damage + ")";
    if (indices[kept] < frames) {
      return Error(ErrorCode::kCorruptData,
                   "video: frame " + std::to_string(indices[kept]) + " does not decode" + suffix);
    }
    const std::string what = "video: frame " + std::to_string(indices[kept]) +
                             " asked for, but the stream ends after " + std::to_string(frames) + " frames";
    if (!damage.empty()) return Error(ErrorCode::kCorruptData, what + suffix);
    return Error(frames == 0 ? ErrorCode::kCorruptData : ErrorCode::kOutOfRange, what);
  }
  return ok_status();
}

#endif

Result<VideoFrames> decode_video_frames(std::span<const std::byte> bytes, std::span<const std::int64_t> indices,
                                        const VideoLimits& limits) {
  VideoFrames out;
  std::size_t frame_bytes = 0;
  const Status st = for_each_video_frame(
      bytes, indices, limits, [&](std::size_t k, const std::uint8_t* rgb, int width, int height) -> Status {
        if (out.rgb.empty()) {
          out.width = width;
          out.height = height;
          frame_bytes = static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3;
          if (frame_bytes * indices.size() > limits.max_decoded_bytes) {
            return Error(ErrorCode::kResourceExhausted,
                         "video: " + std::to_string(indices.size()) + " frames of " + std::to_string(width) + "x" +
                             std::to_string(height) + " need " + std::to_string(frame_bytes * indices.size()) +
                             " bytes, over the limit of " + std::to_string(limits.max_decoded_bytes));
          }
          out.rgb.resize(frame_bytes * indices.size());
        }
        std::memcpy(out.rgb.data() + k * frame_bytes, rgb, frame_bytes);
        return ok_status();
      });
  if (!st.ok()) return st.error();
  out.indices.assign(indices.begin(), indices.end());
  return out;
}

}  // namespace mmfeed::vision
