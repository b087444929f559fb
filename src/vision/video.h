// Videos, decoded with FFmpeg's libraries (libavformat, libavcodec, libswscale) from bytes in
// memory: probe what a container holds, then decode the frames a sampling recipe asked for
// (vision/video_sampling.h) into RGB. Frame i is the i-th frame in presentation order, as the
// readers the Qwen-VL recipes use (decord, torchcodec, PyAV) count them.
//
// Every size that comes from the file is checked before memory is committed: the frame's pixels
// (VideoLimits::max_frame_pixels), the frames asked for times their RGB bytes
// (max_decoded_bytes), the number of frames (max_frames). Damage is an error naming what failed
// (kCorruptData), a codec FFmpeg cannot decode kUnsupported, a frame asked for beyond what the
// stream holds kOutOfRange; never an abort.
//
// Colour: frames are converted from the decoder's YUV with libswscale (bilinear, accurate
// rounding) to RGB24 in the stream's colour matrix (BT.601 unless it says BT.709); the decoded
// YUV planes equal PyAV's exactly, the RGB differs from PyAV's conversion by the rounding of the
// two libswscale builds (bounded in tests/python/video/test_video.py). Rotation metadata is reported,
// not applied, as those readers do.
//
// A build without FFmpeg (MMFEED_VIDEO=OFF) answers kUnsupported, saying so.
//
// Example:
//   auto info = probe_video(bytes, {});                  // 640x360, 150 frames at 30 fps, h264
//   auto frames = decode_video_frames(bytes, {0, 75, 149}, {});
//   const std::uint8_t* second = frames->frame(1);       // height x width x 3
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "mmfeed/error.h"
#include "mmfeed/vision.h"

namespace mmfeed::vision {

struct VideoLimits {
  std::int64_t max_frame_pixels = std::int64_t{1} << 26;     // width x height of one frame
  std::int64_t max_frames = 1 << 20;                         // frames the stream may hold
  std::uint64_t max_decoded_bytes = std::uint64_t{4} << 30;  // RGB bytes of the frames asked for
};

// What the container holds and the frames decoded, as the public API (mmfeed/vision.h) has them.
using mmfeed::VideoFrames;
using mmfeed::VideoInfo;

// Whether this build decodes videos, with which FFmpeg release ("5.1.9-0+deb12u1"; empty
// without) and which of its libraries ("libavformat 59.27.100, ...").
bool video_supported();
std::string ffmpeg_version();
std::string video_libraries();

// What the container holds (its best video stream).
Result<VideoInfo> probe_video(std::span<const std::byte> bytes, const VideoLimits& limits);

// What the container's header alone says of a video of `size` bytes of which only its first
// bytes `head` and its last `tail` are at hand (a remote one's; an MP4's moov lies at one end):
// no packet read, so its frames are the header's count (MP4, MOV) or its duration times its frame
// rate (Matroska), not counted as probe_video counts them (an edit list's cut frames included).
// The cost facts of a remote video without fetching it. An error where the header does not lie
// within those bytes, or states no frame size, rate or length.
Result<VideoInfo> probe_video_header(std::span<const std::byte> head, std::span<const std::byte> tail,
                                     std::uint64_t size, const VideoLimits& limits);

// Hands each frame at `indices` to `sink` as it is decoded: (k, rgb, width, height) for
// indices[k], height x width x 3 bytes valid during the call. Only one frame is held at a time;
// a frame may be handed over again (the same k, the same pixels) when decoding had to restart
// without timestamps. An error from the sink ends decoding with it.
using VideoFrameSink = std::function<Status(std::size_t k, const std::uint8_t* rgb, int width, int height)>;
Status for_each_video_frame(std::span<const std::byte> bytes, std::span<const std::int64_t> indices,
                            const VideoLimits& limits, const VideoFrameSink& sink);

// The frames at `indices` (ascending, each < the stream's frames), as RGB. Frames are known by
// their timestamps where every packet has its own, so that frames nobody asked for that no other
// frame refers to are not decoded (AVDISCARD_NONREF) and decoding jumps to the keyframe before a
// frame asked for when that keyframe lies ahead; else every frame up to the last index is
// decoded and counted. Only the frames asked for are converted and kept.
Result<VideoFrames> decode_video_frames(std::span<const std::byte> bytes, std::span<const std::int64_t> indices,
                                        const VideoLimits& limits);

}  // namespace mmfeed::vision
