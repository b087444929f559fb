// The Qwen-VL video processors: a video file's bytes in, pixel_values_videos rows and the
// video's grid out, as the model's recipe makes them:
//   - Qwen2-VL, Qwen2.5-VL (kQwenVlUtils): qwen-vl-utils 0.0.14's fetch_video picks the frames
//     (vision/video_sampling.h) and the frame size (its smart_resize under a per-frame budget:
//     min_pixels, max_pixels and the clip's total_pixels shared by its frames), then
//     transformers' Qwen2VLVideoProcessor normalizes and patchifies (its own resize, with the hub
//     config's 3136 .. 12845056, then leaves that size as it is; a size it would change is refused);
//   - Qwen3-VL (kQwen3): transformers' Qwen3VLVideoProcessor end to end: its frame sampling
//     (fps 2, 4 .. 768 frames, numpy's linspace rounded) and its smart_resize over the whole
//     clip's pixels (4096 .. 25165824 by the hub config), and the timestamps its processor
//     writes before each temporal group.
// Frames are resized with torch's antialiased bicubic (ResizeFilter::kBicubicTorch, what torchvision
// runs), normalized as the video processors do (ImageBackend::kTorchvision) and cut into patches of
// temporal_patch_size frames (an odd count repeats the last frame). Output is bit-exact with
// transformers given the same decoded frames (tests/python/video/test_video_processor.py).
//
// Planning needs only the container's metadata (probe_video), so a batcher can size its
// buffer before decoding; resize() decodes just the planned frames, one full-size frame held at
// a time, each resized as it arrives (3 bytes a pixel, a quarter of the float32 rows), and
// write() normalizes and patchifies them into the caller's rows, e.g. a batch buffer.
//
// Example:
//   VideoProcessor proc(video_profile("qwen2.5-vl").value());
//   auto plan = proc.plan(bytes, VideoRequest{});          // 8 s at 30 fps: 16 frames, 8 groups
//   std::vector<float> rows(plan->grid.rows() * proc.row_elements());
//   proc.process(bytes, *plan, rows.data());               // or resize(), then write()
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/scratch.h"
#include "mmfeed/error.h"
#include "vision/patchify.h"
#include "vision/profile.h"
#include "vision/video.h"
#include "vision/video_sampling.h"

namespace mmfeed::vision {

using ::mmfeed::VideoRecipe;  // (core/models.h)

struct VideoProfile {
  ModelProfile model;  // patch, merge, temporal patch, mean, std
  VideoRecipe recipe = VideoRecipe::kQwenVlUtils;
  // kQwenVlUtils: the per-frame defaults (128 and 768 tokens' pixels), the clip's total (0.9 x
  // 128000 tokens' pixels), and the processor's own bounds the chosen size must satisfy.
  // kQwen3: min_pixels and max_pixels bound the whole clip (frames x height x width).
  std::int64_t min_pixels = 0;
  std::int64_t max_pixels = 0;
  double total_pixels = 0;
  std::int64_t processor_min_pixels = 0;
  std::int64_t processor_max_pixels = 0;
  // kQwen3's sampling: frames per second, and the count's bounds.
  double fps = 2.0;
  std::int64_t min_frames = 4;
  std::int64_t max_frames = 768;
  // Qwen3-Omni: second_per_grid_t counts by the rate the item asks for (its "fps", else
  // qwen-omni-utils' 2), as the processor does given that fps; else by the rate the frames stand for.
  bool nominal_seconds = false;
};

// A model's video recipe and bounds, or by name: kInvalidArgument for a model the table lacks.
VideoProfile video_profile(const ModelRow& model);
Result<VideoProfile> video_profile(std::string_view name);

// A content item's keys, as the recipe reads them.
struct VideoRequest {
  VideoSamplingRequest sampling;  // kQwen3 reads nframes and fps only
  std::optional<double> min_pixels;
  std::optional<double> max_pixels;
  std::optional<double> total_pixels;  // kQwenVlUtils only
};

struct VideoPlan {
  std::vector<std::int64_t> indices;  // the file's frames decoded, in order (repeats possible)
  Size size;                          // each frame resized to
  Grid grid;                          // t = groups of temporal_patch_size frames
  double video_fps = 0;               // the file's average rate
  double sample_fps = 0;              // kQwenVlUtils: the rate the kept frames stand for
  double asked_fps = 0;               // kQwenVlUtils: the item's "fps", else qwen-vl-utils' 2
  std::vector<double> timestamps;     // kQwen3: seconds of each group (the mean of its first and last frame)
};

// A video's planned frames decoded and resized to plan.size, not yet normalized.
struct ResizedVideo {
  Size size;
  Grid grid;
  std::size_t count = 0;                     // frames, as planned (the last group may be short)
  core::ScratchVector<std::uint8_t> frames;  // count x height x width x 3, RGB

  const std::uint8_t* frame(std::size_t k) const {
    return frames.data() + k * static_cast<std::size_t>(size.width) * static_cast<std::size_t>(size.height) * 3;
  }
};

// Bytes a ResizedVideo of `plan` holds.
std::size_t resized_bytes(const VideoPlan& plan);

// Seconds per temporal group, Qwen2.5-VL's second_per_grid_ts: temporal_patch_size / sample_fps
// (Qwen3-Omni: / asked_fps).
double second_per_grid_t(const VideoProfile& profile, const VideoPlan& plan);

// The plan for a video whose container says `info`: kInvalidArgument naming the value where the
// recipe raises (a frame count outside its bounds, an aspect ratio over 200, keys the recipe
// does not read), kOutOfRange for a clip too short for its sampling, kResourceExhausted naming
// the key for more frames than `limits.max_frames` or frames of more than
// `limits.max_frame_pixels` (a min_pixels that upscales them so). Keys are compared as the
// numbers they are: a max_pixels past any integer bounds nothing, as upstream.
Result<VideoPlan> plan_video(const VideoProfile& profile, const VideoInfo& info, const VideoRequest& request,
                             const VideoLimits& limits = {});

// How many frames plan_video samples (its indices' size), counted before any is listed, so that
// a caller can size them against its budget first; errors as plan_video's for the count.
Result<std::int64_t> planned_frame_count(const VideoProfile& profile, const VideoInfo& info,
                                         const VideoRequest& request, const VideoLimits& limits = {});

// The fewest pixel rows `frames` planned frames take: each temporal group at the smallest frame
// size the recipes give, one merged patch (factor x factor pixels).
std::uint64_t min_video_rows(const VideoProfile& profile, std::int64_t frames);

class VideoProcessor {
 public:
  explicit VideoProcessor(VideoProfile profile, Pixels output = Pixels::kFloat32,
                          ImageKernel kernel = ImageKernel::kAuto);

  const VideoProfile& profile() const { return profile_; }
  Pixels output() const { return output_; }
  // Elements per row: C * T * P * P for every output type (uint8 rows hold the resized bytes).
  int row_elements() const { return profile_.model.row_width(); }
  std::size_t row_bytes() const { return static_cast<std::size_t>(row_elements()) * element_size(output_); }

  Result<VideoPlan> plan(std::span<const std::byte> bytes, const VideoRequest& request,
                         const VideoLimits& limits = {}) const;

  // Decodes plan.indices from `bytes` and resizes each frame to plan.size.
  Result<ResizedVideo> resize(std::span<const std::byte> bytes, const VideoPlan& plan,
                              const VideoLimits& limits = {}) const;
  // Normalizes and patchifies `video` into `dest` (video.grid.rows() rows of row_bytes()), a
  // temporal group of temporal_patch_size frames at a time (an odd count repeats the last).
  void write(const ResizedVideo& video, void* dest) const;
  // resize(), then write().
  Status process(std::span<const std::byte> bytes, const VideoPlan& plan, void* dest,
                 const VideoLimits& limits = {}) const;

 private:
  VideoProfile profile_;
  Pixels output_;
  ImageKernel kernel_;
  NormalizeTable table_;
};

}  // namespace mmfeed::vision
