#include "vision/video_processor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "vision/resample.h"

namespace mmfeed::vision {

namespace {

constexpr int kSpatialMerge = 2;

std::string dims(int width, int height) { return std::to_string(width) + "x" + std::to_string(height); }

Status aspect_ratio_ok(int height, int width) {
  const double ratio = static_cast<double>(std::max(height, width)) / std::min(height, width);
  if (ratio > 200) {
    return Error(ErrorCode::kInvalidArgument, "video: absolute aspect ratio must be smaller than 200, got " +
                                                  std::to_string(ratio) + " (" + dims(width, height) + ")");
  }
  return ok_status();
}

std::int64_t python_round(double x) { return static_cast<std::int64_t>(std::nearbyint(x)); }  // half to even

// qwen-vl-utils 0.0.14's smart_resize: sides at least one factor, max_pixels may be fractional.
Result<Size> smart_resize_qwen_vl_utils(int height, int width, int factor, double min_pixels, double max_pixels) {
  if (max_pixels < min_pixels) {
    return Error(ErrorCode::kInvalidArgument, "video: max_pixels " + std::to_string(max_pixels) +
                                                  " is below min_pixels " + std::to_string(min_pixels));
  }
  if (Status st = aspect_ratio_ok(height, width); !st.ok()) return st.error();
  std::int64_t h_bar = std::max<std::int64_t>(factor, python_round(static_cast<double>(height) / factor) * factor);
  std::int64_t w_bar = std::max<std::int64_t>(factor, python_round(static_cast<double>(width) / factor) * factor);
  const double area = static_cast<double>(static_cast<std::int64_t>(height) * width);
  if (static_cast<double>(h_bar * w_bar) > max_pixels) {
    const double beta = std::sqrt(area / max_pixels);
    h_bar = static_cast<std::int64_t>(std::floor(height / beta / factor)) * factor;
    w_bar = static_cast<std::int64_t>(std::floor(width / beta / factor)) * factor;
  } else if (static_cast<double>(h_bar * w_bar) < min_pixels) {
    const double beta = std::sqrt(min_pixels / area);
    h_bar = static_cast<std::int64_t>(std::ceil(height * beta / factor)) * factor;
    w_bar = static_cast<std::int64_t>(std::ceil(width * beta / factor)) * factor;
  }
  if (h_bar <= 0 || w_bar <= 0) {
    return Error(ErrorCode::kInvalidArgument, "video: frames of " + dims(width, height) + " resize to nothing under max_pixels " +
                                                  std::to_string(max_pixels));
  }
  return Size{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

// Qwen3VLVideoProcessor's smart_resize: the budget bounds frames x height x width.
Result<Size> smart_resize_qwen3(std::int64_t frames, int height, int width, int temporal_factor, int factor,
                                std::int64_t min_pixels, std::int64_t max_pixels) {
  if (frames < temporal_factor) {
    return Error(ErrorCode::kOutOfRange, "video: " + std::to_string(frames) + " frames sampled, fewer than the " +
                                             std::to_string(temporal_factor) + " a temporal patch needs");
  }
  if (height < factor || width < factor) {
    const double scale = std::max(static_cast<double>(factor) / height, static_cast<double>(factor) / width);
    height = static_cast<int>(height * scale);
    width = static_cast<int>(width * scale);
  }
  if (Status st = aspect_ratio_ok(height, width); !st.ok()) return st.error();
  std::int64_t h_bar = python_round(static_cast<double>(height) / factor) * factor;
  std::int64_t w_bar = python_round(static_cast<double>(width) / factor) * factor;
  const std::int64_t t_bar = python_round(static_cast<double>(frames) / temporal_factor) * temporal_factor;
  const std::int64_t volume = frames * height * width;
  if (t_bar * h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(static_cast<double>(volume) / static_cast<double>(max_pixels));
    h_bar = std::max<std::int64_t>(factor, static_cast<std::int64_t>(std::floor(height / beta / factor)) * factor);
    w_bar = std::max<std::int64_t>(factor, static_cast<std::int64_t>(std::floor(width / beta / factor)) * factor);
  } else if (t_bar * h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / static_cast<double>(volume));
    h_bar = static_cast<std::int64_t>(std::ceil(height * beta / factor)) * factor;
    w_bar = static_cast<std::int64_t>(std::ceil(width * beta / factor)) * factor;
  }
  return Size{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

Result<VideoPlan> plan_qwen_vl_utils(const VideoProfile& profile, const VideoInfo& info, const VideoRequest& request) {
  auto frames = plan_qwen2_video_frames(request.sampling, info.frames, info.fps);
  if (!frames.ok()) return std::move(frames).error();
  VideoPlan plan;
  plan.indices = std::move(frames->indices);
  plan.sample_fps = frames->sample_fps;
  const auto n = static_cast<double>(plan.indices.size());
  const int factor = profile.model.factor();
  const double min_pixels = request.min_pixels.value_or(static_cast<double>(profile.min_pixels));
  const double total_pixels = request.total_pixels.value_or(profile.total_pixels);
  double max_pixels = std::max(std::min(static_cast<double>(profile.max_pixels), total_pixels / n * 2),
                               static_cast<double>(static_cast<std::int64_t>(min_pixels * 1.05)));
  if (request.max_pixels) max_pixels = std::min(*request.max_pixels, max_pixels);
  auto size = smart_resize_qwen_vl_utils(info.height, info.width, factor, min_pixels, max_pixels);
  if (!size.ok()) return std::move(size).error();
  // The processor then applies its own smart_resize to frames of that size; it must leave it be.
  auto again = smart_resize(size->height, size->width, factor, profile.processor_min_pixels, profile.processor_max_pixels);
  if (!again.ok()) return std::move(again).error();
  if (again->height != size->height || again->width != size->width) {
    return Error(ErrorCode::kUnsupported, "video: frames of " + dims(size->width, size->height) +
                                              " (from min_pixels/max_pixels) lie outside the processor's " +
                                              std::to_string(profile.processor_min_pixels) + " .. " +
                                              std::to_string(profile.processor_max_pixels) +
                                              " pixels, which would resize them a second time");
  }
  plan.size = *size;
  return plan;
}

Result<VideoPlan> plan_qwen3(const VideoProfile& profile, const VideoInfo& info, const VideoRequest& request) {
  const VideoSamplingRequest& s = request.sampling;
  if (s.video_start || s.video_end || request.total_pixels) {
    return Error(ErrorCode::kInvalidArgument,
                 "video: Qwen3-VL's video processor reads no video_start, video_end or total_pixels");
  }
  if (s.nframes && s.fps) return Error(ErrorCode::kInvalidArgument, "video: give either \"nframes\" or \"fps\", not both");
  const auto min_frames = static_cast<std::int64_t>(s.min_frames.value_or(static_cast<double>(profile.min_frames)));
  const auto max_frames = static_cast<std::int64_t>(s.max_frames.value_or(static_cast<double>(profile.max_frames)));
  auto indices = plan_qwen3_video_frames(s.nframes, s.fps.value_or(profile.fps), min_frames, max_frames, info.frames, info.fps);
  if (!indices.ok()) return std::move(indices).error();
  VideoPlan plan;
  plan.indices = std::move(indices).value();
  const auto min_pixels = static_cast<std::int64_t>(request.min_pixels.value_or(static_cast<double>(profile.min_pixels)));
  const auto max_pixels = static_cast<std::int64_t>(request.max_pixels.value_or(static_cast<double>(profile.max_pixels)));
  auto size = smart_resize_qwen3(static_cast<std::int64_t>(plan.indices.size()), info.height, info.width,
                                 profile.model.temporal_patch_size, profile.model.factor(), min_pixels, max_pixels);
  if (!size.ok()) return std::move(size).error();
  plan.size = *size;
  // The processor's _calculate_timestamps: indices padded with the last to whole groups, each
  // group at the mean of its first and last frame's time.
  const int T = profile.model.temporal_patch_size;
  std::vector<std::int64_t> padded = plan.indices;
  while (padded.size() % static_cast<std::size_t>(T) != 0) padded.push_back(padded.back());
  for (std::size_t i = 0; i < padded.size(); i += static_cast<std::size_t>(T)) {
    const double first = static_cast<double>(padded[i]) / info.fps;
    const double last = static_cast<double>(padded[i + static_cast<std::size_t>(T) - 1]) / info.fps;
    plan.timestamps.push_back((first + last) / 2);
  }
  return plan;
}

}  // namespace

Result<VideoProfile> video_profile(std::string_view model) {
  auto base = model_profile(model);
  if (!base.ok()) return std::move(base).error();
  VideoProfile p;
  p.model = std::move(base).value();
  const auto f = static_cast<std::int64_t>(p.model.patch_size * kSpatialMerge);
  if (model == "qwen3-vl") {  // the hub's video_preprocessor_config.json
    p.recipe = VideoRecipe::kQwen3;
    p.min_pixels = 4096;
    p.max_pixels = 25165824;
  } else {  // qwen-vl-utils' VIDEO_MIN/MAX_TOKEN_NUM and MODEL_SEQ_LEN; the hub's processor bounds
    p.recipe = VideoRecipe::kQwenVlUtils;
    p.min_pixels = 128 * f * f;
    p.max_pixels = 768 * f * f;
    p.total_pixels = 128000.0 * static_cast<double>(f) * static_cast<double>(f) * 0.9;
    p.processor_min_pixels = p.model.min_pixels;
    p.processor_max_pixels = p.model.max_pixels;
    if (model == "qwen2.5-vl") p.tokens_per_second = 2;
  }
  return p;
}

std::size_t resized_bytes(const VideoPlan& plan) {
  return plan.indices.size() * static_cast<std::size_t>(plan.size.width) * static_cast<std::size_t>(plan.size.height) * 3;
}

double second_per_grid_t(const VideoProfile& profile, const VideoPlan& plan) {
  return plan.sample_fps > 0 ? profile.model.temporal_patch_size / plan.sample_fps : 0;
}

Result<VideoPlan> plan_video(const VideoProfile& profile, const VideoInfo& info, const VideoRequest& request) {
  auto plan = profile.recipe == VideoRecipe::kQwen3 ? plan_qwen3(profile, info, request)
                                                     : plan_qwen_vl_utils(profile, info, request);
  if (!plan.ok()) return plan;
  const int P = profile.model.patch_size;
  const int T = profile.model.temporal_patch_size;
  const auto groups = (static_cast<std::int64_t>(plan->indices.size()) + T - 1) / T;
  plan->grid = Grid{static_cast<int>(groups), plan->size.height / P, plan->size.width / P};
  plan->video_fps = info.fps;
  return plan;
}

VideoProcessor::VideoProcessor(VideoProfile profile, OutputType output, Kernel kernel)
    : profile_(std::move(profile)), output_(output), kernel_(kernel), table_(profile_.model, Normalization::kVideo) {}

Result<VideoPlan> VideoProcessor::plan(std::span<const std::byte> bytes, const VideoRequest& request,
                                       const VideoLimits& limits) const {
  auto info = probe_video(bytes, limits);
  if (!info.ok()) return std::move(info).error();
  return plan_video(profile_, *info, request);
}

Result<ResizedVideo> VideoProcessor::resize(std::span<const std::byte> bytes, const VideoPlan& plan,
                                           const VideoLimits& limits) const {
  ResizedVideo out;
  out.size = plan.size;
  out.grid = plan.grid;
  out.count = plan.indices.size();
  out.frames.resize(resized_bytes(plan));
  const std::size_t frame_bytes = out.frames.size() / std::max<std::size_t>(out.count, 1);
  const Status st = for_each_video_frame(
      bytes, plan.indices, limits, [&](std::size_t k, const std::uint8_t* rgb, int width, int height) -> Status {
        resample_u8(rgb, width, height, 3, out.frames.data() + k * frame_bytes, plan.size.width, plan.size.height,
                    Filter::kBicubicTorch, kernel_);
        return ok_status();
      });
  if (!st.ok()) return st.error();
  return out;
}

void VideoProcessor::write(const ResizedVideo& video, void* dest) const {
  const auto T = static_cast<std::size_t>(profile_.model.temporal_patch_size);
  const Grid group{1, video.grid.h, video.grid.w};
  const std::size_t group_bytes = static_cast<std::size_t>(group.rows()) * row_bytes();
  std::vector<const std::uint8_t*> slots(T);
  for (std::size_t g = 0; g * T < video.count; ++g) {
    for (std::size_t t = 0; t < T; ++t) slots[t] = video.frame(std::min(g * T + t, video.count - 1));
    patchify_group(slots.data(), group, profile_.model, table_, output_, static_cast<std::uint8_t*>(dest) + g * group_bytes,
                   kernel_);
  }
}

Status VideoProcessor::process(std::span<const std::byte> bytes, const VideoPlan& plan, void* dest,
                               const VideoLimits& limits) const {
  auto video = resize(bytes, plan, limits);
  if (!video.ok()) return video.error();
  write(*video, dest);
  return ok_status();
}

}  // namespace mmfeed::vision
