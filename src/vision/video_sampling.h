// Which frames of a video Qwen2-VL and Qwen2.5-VL see, as qwen-vl-utils 0.0.14 picks them
// (`fetch_video` with its decord or torchcodec reader): the frames of [video_start, video_end]
// (calculate_video_frame_range), how many of them (smart_nframes: `nframes` rounded to an even
// count, or `fps` frames per second, 2 by default, between min_frames and max_frames), spread
// evenly (torch.linspace(first, last, n) in float32, rounded half to even), and the rate they
// stand for (sample_fps). Pure arithmetic; the decoder (vision/video.h) then decodes just those.
//
// Example:
//   VideoSamplingRequest request;               // fps 2, frames 4..768
//   auto plan = plan_qwen2_video_frames(request, /*total_frames=*/300, /*video_fps=*/30.0);
//   // plan->indices: 20 frames, 0 .. 299; plan->sample_fps: 2.0
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mmfeed/error.h"
#include "mmfeed/vision.h"
#include "vision/video.h"

namespace mmfeed::vision {

// qwen-vl-utils' FPS: the rate its recipe samples at when an item names none.
inline constexpr double kQwenVlUtilsFps = 2.0;

// A content item's sampling keys and the frames kept, as the public API (mmfeed/vision.h) has them.
using mmfeed::VideoFramePlan;
using mmfeed::VideoSamplingRequest;

// kInvalidArgument, naming the value, where qwen-vl-utils raises: both nframes and fps, a time
// range that ends before it starts, a frame count outside [2, frames in range].
Result<VideoFramePlan> plan_qwen2_video_frames(const VideoSamplingRequest& request, std::int64_t total_frames,
                                               double video_fps);

// How many frames transformers' Qwen3VLVideoProcessor samples (its sample_frames): `nframes`
// when given, else int(total / video_fps * fps) clamped to [min_frames, min(max_frames, total)],
// compared as the numbers they are (upstream's Python numbers do not wrap). Upstream repeats
// frames for an nframes above the video's, as here, up to `max_count` (the most a video may hold,
// VideoLimits::max_frames): more is kResourceExhausted, before a frame is listed. A count below 1
// is kInvalidArgument naming the keys.
Result<std::int64_t> qwen3_frame_count(std::optional<double> nframes, double fps, double min_frames, double max_frames,
                                       std::int64_t total_frames, double video_fps,
                                       std::int64_t max_count = VideoLimits{}.max_frames);

// Those frames, spread as numpy.linspace(0, total - 1, n).round().
Result<std::vector<std::int64_t>> plan_qwen3_video_frames(std::optional<double> nframes, double fps, double min_frames,
                                                          double max_frames, std::int64_t total_frames,
                                                          double video_fps,
                                                          std::int64_t max_count = VideoLimits{}.max_frames);

// torch.linspace(start, end, steps) (float32) rounded half to even, as torch computes it.
std::vector<std::int64_t> linspace_rounded(std::int64_t start, std::int64_t end, std::int64_t steps);

}  // namespace mmfeed::vision
