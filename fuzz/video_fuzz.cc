// Fuzz target: the video probe and decoder (FFmpeg's demuxers and decoders behind our checks).
// Invariants checked: a successful decode holds exactly frames x height x width x 3 bytes of the
// probed size; a frame at or past the probed count is never decoded; nothing aborts.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "vision/video.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::vision;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  VideoLimits limits;  // keep each input cheap
  limits.max_frame_pixels = 1 << 16;
  limits.max_frames = 1 << 10;
  limits.max_decoded_bytes = 1 << 22;
  const auto info = probe_video(bytes, limits);
  const std::vector<std::int64_t> first_last =
      info.ok() ? std::vector<std::int64_t>{0, info->frames - 1} : std::vector<std::int64_t>{0, 3};
  const auto frames = decode_video_frames(bytes, first_last, limits);
  if (frames.ok()) {
    const std::size_t expected =
        first_last.size() * static_cast<std::size_t>(frames->width) * static_cast<std::size_t>(frames->height) * 3;
    if (frames->rgb.size() != expected) std::abort();
    if (info.ok() && (frames->width != info->width || frames->height != info->height)) std::abort();
  }
  if (info.ok() && decode_video_frames(bytes, std::vector<std::int64_t>{info->frames}, limits).ok()) std::abort();
  return 0;
}
