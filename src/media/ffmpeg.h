// FFmpeg's plumbing shared by the video decoder (vision/video.cc) and the audio decoder
// (audio/decode.cc): a container opened from bytes in memory, and the owners of FFmpeg's objects.
// Built only with FFmpeg (MMFEED_VIDEO=ON).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include "mmfeed/error.h"

namespace mmfeed::media {

// FFmpeg's words for a negative status.
std::string av_message(int status);

struct FormatCloser {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct CodecCloser {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct PacketCloser {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct FrameCloser {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
using PacketPtr = std::unique_ptr<AVPacket, PacketCloser>;
using FramePtr = std::unique_ptr<AVFrame, FrameCloser>;

// A container read from `bytes` (which must outlive it). FFmpeg's own log stays quiet: the
// errors returned carry the reason, prefixed with `what` ("video").
class MediaFile {
 public:
  // `probe_packets`: whether a stream whose demuxer doubts its codec (PCM in a WAV may hold AC-3
  // or DTS) has its packets probed for another; libsndfile never does, and it costs more than decoding.
  static Result<std::unique_ptr<MediaFile> > open(std::span<const std::byte> bytes, std::string_view what,
                                                  bool probe_packets = true);
  // A file of `size` bytes of which only its first bytes `head` and its last `tail` are at hand
  // (a remote one's, fetched by two ranged GETs): a read in the gap between them fails (EIO).
  // Enough for what a container's header says (an MP4's moov lies at one end), not its packets.
  static Result<std::unique_ptr<MediaFile> > open_parts(std::span<const std::byte> head,
                                                        std::span<const std::byte> tail, std::int64_t size,
                                                        std::string_view what, bool probe_packets = true);
  // Reads packets (and decodes some) to fill in the streams' parameters the header does not
  // state; costly where a demuxer asks for its packets to be probed (PCM in WAV: ~1 ms a second).
  Status find_stream_info();
  MediaFile(const MediaFile&) = delete;
  MediaFile& operator=(const MediaFile&) = delete;
  ~MediaFile();

  AVFormatContext* format() { return format_.get(); }

 private:
  struct Reader {
    std::span<const std::byte> bytes;  // from byte 0
    std::span<const std::byte> tail;   // from tail_at to size
    std::int64_t tail_at = 0, size = 0;
    std::int64_t position = 0;
    static int read(void* opaque, std::uint8_t* out, int size);
    static std::int64_t seek(void* opaque, std::int64_t offset, int whence);
  };
  struct IoCloser {
    void operator()(AVIOContext* io) const;
  };
  MediaFile() = default;
  std::string what_;
  Reader reader_;
  std::unique_ptr<AVIOContext, IoCloser> io_;
  std::unique_ptr<AVFormatContext, FormatCloser> format_;  // closed before io_ (declared after it)
};

// A decoder opened for `stream` of `file`, on one thread (the engine's pool runs many files at once).
Result<std::unique_ptr<AVCodecContext, CodecCloser> > open_decoder(AVStream* stream, const AVCodec* codec,
                                                                   std::string_view what);

}  // namespace mmfeed::media
