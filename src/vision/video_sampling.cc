#include "vision/video_sampling.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace mmfeed::vision {

namespace {

constexpr int kFrameFactor = 2;     // FRAME_FACTOR: counts are even (temporal patches of 2)
constexpr double kMinFrames = 4;    // FPS_MIN_FRAMES
constexpr double kMaxFrames = 768;  // FPS_MAX_FRAMES

// Python's round(): half to even.
double round_half_even(double x) { return std::nearbyint(x); }  // the default rounding mode is to nearest, ties even

// In doubles, as upstream's Python numbers: a count from the manifest may lie past any integer.
double round_by_factor(double x, int factor) { return round_half_even(x / factor) * factor; }
double ceil_by_factor(double x, int factor) { return std::ceil(x / factor) * factor; }
double floor_by_factor(double x, int factor) { return std::floor(x / factor) * factor; }

std::string number(double x) {
  std::string text = std::to_string(x);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

}  // namespace

std::vector<std::int64_t> linspace_rounded(std::int64_t start, std::int64_t end, std::int64_t steps) {
  std::vector<std::int64_t> out;
  if (steps <= 0) return out;
  out.reserve(static_cast<std::size_t>(steps));
  if (steps == 1) {
    out.push_back(static_cast<std::int64_t>(std::nearbyint(static_cast<float>(start))));
    return out;
  }
  // As ATen's CPU kernel: float32 throughout, the first half counted up from start, the second
  // half down from end.
  const auto first = static_cast<float>(start);
  const auto last = static_cast<float>(end);
  const float step = (last - first) / static_cast<float>(steps - 1);
  const std::int64_t halfway = steps / 2;
  for (std::int64_t i = 0; i < steps; ++i) {
    const float value =
        i < halfway ? first + step * static_cast<float>(i) : last - step * static_cast<float>(steps - i - 1);
    out.push_back(static_cast<std::int64_t>(std::nearbyint(value)));
  }
  return out;
}

Result<VideoFramePlan> plan_qwen2_video_frames(const VideoSamplingRequest& request, std::int64_t total_frames,
                                               double video_fps) {
  if (video_fps <= 0) return Error(ErrorCode::kInvalidArgument, "video: the frame rate must be positive");
  if (total_frames <= 0) return Error(ErrorCode::kInvalidArgument, "video: the video holds no frames");
  if (request.nframes && request.fps) {
    return Error(ErrorCode::kInvalidArgument, "video: give either \"nframes\" or \"fps\", not both");
  }
  VideoFramePlan plan;
  std::int64_t count = total_frames;
  plan.last = total_frames - 1;
  if (request.video_start || request.video_end) {  // calculate_video_frame_range
    const double duration = static_cast<double>(total_frames) / video_fps;
    double start_s = 0, end_s = duration;
    if (request.video_start) {
      start_s = std::clamp(*request.video_start, 0.0, duration);
      plan.first = static_cast<std::int64_t>(std::ceil(start_s * video_fps));
    }
    if (request.video_end) {
      end_s = std::clamp(*request.video_end, 0.0, duration);
      plan.last = std::min(static_cast<std::int64_t>(std::floor(end_s * video_fps)), total_frames - 1);
    }
    if (plan.first >= plan.last) {
      return Error(ErrorCode::kInvalidArgument,
                   "video: the range " + number(start_s) + "-" + number(end_s) + " s holds no frames (frame " +
                       std::to_string(plan.first) + " is not before frame " + std::to_string(plan.last) +
                       "; the video is " + number(duration) + " s, " + std::to_string(total_frames) + " frames at " +
                       number(video_fps) + " fps)");
    }
    count = plan.last - plan.first + 1;
  }
  double n = 0;  // smart_nframes
  if (request.nframes) {
    n = round_by_factor(*request.nframes, kFrameFactor);
  } else {
    const double fps = request.fps.value_or(kQwenVlUtilsFps);
    const double least = ceil_by_factor(request.min_frames.value_or(kMinFrames), kFrameFactor);
    const double most =
        floor_by_factor(request.max_frames.value_or(std::min(kMaxFrames, static_cast<double>(count))), kFrameFactor);
    double wanted = static_cast<double>(count) / video_fps * fps;
    wanted = std::min(std::min(std::max(wanted, least), most), static_cast<double>(count));
    n = floor_by_factor(wanted, kFrameFactor);
  }
  if (!(n >= kFrameFactor && n <= static_cast<double>(count))) {  // NaN included
    return Error(ErrorCode::kInvalidArgument, "video: " + number(n) + " frames asked for; the range holds " +
                                                  std::to_string(count) + " (at least " + std::to_string(kFrameFactor) +
                                                  " are needed)");
  }
  const auto frames = static_cast<std::int64_t>(n);  // in [2, count]
  plan.indices = linspace_rounded(plan.first, plan.last, frames);
  plan.sample_fps = n / std::max(static_cast<double>(count), 1e-6) * video_fps;
  return plan;
}

Result<std::int64_t> qwen3_frame_count(std::optional<double> nframes, double fps, double min_frames, double max_frames,
                                       std::int64_t total_frames, double video_fps, std::int64_t max_count) {
  if (video_fps <= 0) return Error(ErrorCode::kInvalidArgument, "video: the frame rate must be positive");
  if (total_frames <= 0) return Error(ErrorCode::kInvalidArgument, "video: the video holds no frames");
  double n = 0;
  if (nframes) {
    if (!(*nframes >= 1)) {
      return Error(ErrorCode::kInvalidArgument, "video: \"nframes\" must be a positive count, not " + number(*nframes));
    }
    n = std::trunc(*nframes);
    if (n > static_cast<double>(max_count)) {
      return Error(ErrorCode::kResourceExhausted, "video: nframes " + number(*nframes) + " is more than the " +
                                                      std::to_string(max_count) +
                                                      " frames a video may hold, the most mmfeed samples from one");
    }
  } else {
    n = std::trunc(static_cast<double>(total_frames) / video_fps * fps);  // int(): toward zero
    n = std::min({std::max(n, min_frames), max_frames, static_cast<double>(total_frames)});
    if (!(n >= 1)) {  // NaN included
      return Error(ErrorCode::kInvalidArgument, "video: fps " + number(fps) + ", min_frames " + number(min_frames) +
                                                    " and max_frames " + number(max_frames) + " sample " + number(n) +
                                                    " of the video's " + std::to_string(total_frames) +
                                                    " frames; at least 1 is needed");
    }
  }
  return static_cast<std::int64_t>(n);  // in [1, max(max_count, total_frames)]
}

Result<std::vector<std::int64_t>> plan_qwen3_video_frames(std::optional<double> nframes, double fps, double min_frames,
                                                          double max_frames, std::int64_t total_frames,
                                                          double video_fps, std::int64_t max_count) {
  auto count = qwen3_frame_count(nframes, fps, min_frames, max_frames, total_frames, video_fps, max_count);
  if (!count.ok()) return std::move(count).error();
  const std::int64_t n = *count;
  // numpy.linspace: i * step from 0, the last value exactly `total - 1`; np.round: half to even.
  std::vector<std::int64_t> indices(static_cast<std::size_t>(n), 0);
  if (n > 1) {
    const double stop = static_cast<double>(total_frames - 1);
    const double step = stop / static_cast<double>(n - 1);
    for (std::int64_t i = 0; i + 1 < n; ++i) {
      indices[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(i) * step));
    }
    indices.back() = total_frames - 1;
  }
  return indices;
}

}  // namespace mmfeed::vision
