#include "media/ffmpeg.h"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace mmfeed::media {

std::string av_message(int status) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(status, text, sizeof text);
  return text;
}

int MediaFile::Reader::read(void* opaque, std::uint8_t* out, int size) {
  auto* self = static_cast<Reader*>(opaque);
  // The part holding the position: the bytes from 0, else the tail; a gap between them is not read.
  const bool in_tail = self->position >= self->tail_at && !self->tail.empty();
  const std::span<const std::byte> part = in_tail ? self->tail : self->bytes;
  const std::int64_t at = self->position - (in_tail ? self->tail_at : 0);
  const std::int64_t left = static_cast<std::int64_t>(part.size()) - at;
  if (left <= 0) return self->position >= self->size ? AVERROR_EOF : AVERROR(EIO);
  const int n = static_cast<int>(std::min<std::int64_t>(left, size));
  std::memcpy(out, part.data() + at, static_cast<std::size_t>(n));
  self->position += n;
  return n;
}

std::int64_t MediaFile::Reader::seek(void* opaque, std::int64_t offset, int whence) {
  auto* self = static_cast<Reader*>(opaque);
  const std::int64_t size = self->size;
  if (whence == AVSEEK_SIZE) return size;
  std::int64_t to = offset;
  switch (whence & ~AVSEEK_FORCE) {
    case SEEK_SET: break;
    case SEEK_CUR: to += self->position; break;
    case SEEK_END: to += size; break;
    default: return AVERROR(EINVAL);
  }
  if (to < 0 || to > size) return AVERROR(EINVAL);
  self->position = to;
  return to;
}

void MediaFile::IoCloser::operator()(AVIOContext* io) const {
  av_freep(&io->buffer);
  avio_context_free(&io);
}

MediaFile::~MediaFile() = default;

Result<std::unique_ptr<MediaFile> > MediaFile::open(std::span<const std::byte> bytes, std::string_view what,
                                                    bool probe_packets) {
  return open_parts(bytes, {}, static_cast<std::int64_t>(bytes.size()), what, probe_packets);
}

Result<std::unique_ptr<MediaFile> > MediaFile::open_parts(std::span<const std::byte> head,
                                                          std::span<const std::byte> tail, std::int64_t size,
                                                          std::string_view what, bool probe_packets) {
  // FFmpeg's own messages would go to stderr for every damaged sample; ours carry the reason.
  static std::once_flag quiet;
  std::call_once(quiet, [] { av_log_set_level(AV_LOG_QUIET); });
  const std::string prefix = std::string(what) + ": ";
  auto file = std::unique_ptr<MediaFile>(new MediaFile);
  file->reader_.bytes = head;
  file->reader_.tail = tail;
  file->reader_.size = size;
  file->reader_.tail_at = size - static_cast<std::int64_t>(tail.size());
  constexpr int kBuffer = 1 << 16;
  auto* buffer = static_cast<std::uint8_t*>(av_malloc(kBuffer));
  if (buffer == nullptr) return Error(ErrorCode::kResourceExhausted, prefix + "cannot allocate the read buffer");
  file->io_.reset(avio_alloc_context(buffer, kBuffer, 0, &file->reader_, &Reader::read, nullptr, &Reader::seek));
  if (!file->io_) {
    av_free(buffer);
    return Error(ErrorCode::kResourceExhausted, prefix + "cannot allocate the reader");
  }
  AVFormatContext* format = avformat_alloc_context();
  if (format == nullptr) return Error(ErrorCode::kResourceExhausted, prefix + "cannot allocate the demuxer");
  format->pb = file->io_.get();
  format->flags |= AVFMT_FLAG_CUSTOM_IO;
  if (!probe_packets) format->max_probe_packets = 0;  // read before the streams are made, at open
  if (int status = avformat_open_input(&format, nullptr, nullptr, nullptr); status < 0) {
    return Error(ErrorCode::kCorruptData, prefix + "not a container FFmpeg reads (" + av_message(status) + ")");
  }
  file->format_.reset(format);
  file->what_ = what;
  return file;
}

Status MediaFile::find_stream_info() {
  if (int status = avformat_find_stream_info(format_.get(), nullptr); status < 0) {
    return Error(ErrorCode::kCorruptData, what_ + ": cannot read the streams (" + av_message(status) + ")");
  }
  return ok_status();
}

Result<std::unique_ptr<AVCodecContext, CodecCloser> > open_decoder(AVStream* stream, const AVCodec* codec,
                                                                   std::string_view what) {
  const std::string prefix = std::string(what) + ": ";
  std::unique_ptr<AVCodecContext, CodecCloser> decoder(avcodec_alloc_context3(codec));
  if (!decoder) return Error(ErrorCode::kResourceExhausted, prefix + "cannot allocate the decoder");
  if (avcodec_parameters_to_context(decoder.get(), stream->codecpar) < 0) {
    return Error(ErrorCode::kCorruptData, prefix + "the stream's codec parameters are unusable");
  }
  decoder->thread_count = 1;  // one file per worker thread
  decoder->pkt_timebase = stream->time_base;
  if (int status = avcodec_open2(decoder.get(), codec, nullptr); status < 0) {
    return Error(ErrorCode::kUnsupported,
                 prefix + "cannot open the " + codec->name + " decoder (" + av_message(status) + ")");
  }
  return decoder;
}

}  // namespace mmfeed::media
