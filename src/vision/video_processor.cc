#include "vision/video_processor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "mmfeed/numbers.h"
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

// Upstream divides by max_pixels (and takes a square root of the quotient): it must be positive.
Status positive_max_pixels(double max_pixels) {
  if (max_pixels > 0) return ok_status();
  return Error(ErrorCode::kInvalidArgument, "video: max_pixels must be positive, not " + number_text(max_pixels));
}

// The sides min_pixels scales a frame up to, computed in doubles (a min_pixels from the manifest
// may lie past any integer): refused naming it beyond the pixels a frame may have.
Result<Size> upscaled(double h_bar, double w_bar, int height, int width, double min_pixels, const VideoLimits& limits) {
  const auto most = static_cast<double>(limits.max_frame_pixels);
  if (!(h_bar <= most && w_bar <= most && h_bar * w_bar <= most)) {
    return Error(ErrorCode::kResourceExhausted,
                 "video: min_pixels " + number_text(min_pixels) + " would resize frames of " + dims(width, height) +
                     " to more than the " + std::to_string(limits.max_frame_pixels) + " pixels a frame may have");
  }
  return Size{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

// qwen-vl-utils 0.0.14's smart_resize: sides at least one factor, max_pixels may be fractional.
Result<Size> smart_resize_qwen_vl_utils(int height, int width, int factor, double min_pixels, double max_pixels,
                                        const VideoLimits& limits) {
  MMFEED_RETURN_IF_ERROR(positive_max_pixels(max_pixels));
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
    return upscaled(std::ceil(height * beta / factor) * factor, std::ceil(width * beta / factor) * factor, height,
                    width, min_pixels, limits);
  }
  if (h_bar <= 0 || w_bar <= 0) {
    return Error(ErrorCode::kInvalidArgument, "video: frames of " + dims(width, height) +
                                                  " resize to nothing under max_pixels " + std::to_string(max_pixels));
  }
  return Size{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

// Qwen3VLVideoProcessor's smart_resize: the budget bounds frames x height x width. The bounds are
// compared as doubles, exact for every volume a video may have (frames x pixels under 2^53).
Result<Size> smart_resize_qwen3(std::int64_t frames, int height, int width, int temporal_factor, int factor,
                                double min_pixels, double max_pixels, const VideoLimits& limits) {
  MMFEED_RETURN_IF_ERROR(positive_max_pixels(max_pixels));
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
  const auto volume = static_cast<double>(frames * height * width);
  const auto planned = static_cast<double>(t_bar * h_bar * w_bar);
  if (planned > max_pixels) {
    const double beta = std::sqrt(volume / max_pixels);
    h_bar = std::max<std::int64_t>(factor, static_cast<std::int64_t>(std::floor(height / beta / factor)) * factor);
    w_bar = std::max<std::int64_t>(factor, static_cast<std::int64_t>(std::floor(width / beta / factor)) * factor);
  } else if (planned < min_pixels) {
    const double beta = std::sqrt(min_pixels / volume);
    return upscaled(std::ceil(height * beta / factor) * factor, std::ceil(width * beta / factor) * factor, height,
                    width, min_pixels, limits);
  }
  return Size{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

Result<VideoPlan> plan_qwen_vl_utils(const VideoProfile& profile, const VideoInfo& info, const VideoRequest& request,
                                     const VideoLimits& limits) {
  auto frames = plan_qwen2_video_frames(request.sampling, info.frames, info.fps);
  if (!frames.ok()) return std::move(frames).error();
  VideoPlan plan;
  plan.indices = std::move(frames->indices);
  plan.sample_fps = frames->sample_fps;
  plan.asked_fps = request.sampling.fps.value_or(kQwenVlUtilsFps);
  const auto n = static_cast<double>(plan.indices.size());
  const int factor = profile.model.factor();
  const double min_pixels = request.min_pixels.value_or(static_cast<double>(profile.min_pixels));
  const double total_pixels = request.total_pixels.value_or(profile.total_pixels);
  double max_pixels =
      std::max(std::min(static_cast<double>(profile.max_pixels), total_pixels / n * 2), std::trunc(min_pixels * 1.05));
  if (request.max_pixels) max_pixels = std::min(*request.max_pixels, max_pixels);
  auto size = smart_resize_qwen_vl_utils(info.height, info.width, factor, min_pixels, max_pixels, limits);
  if (!size.ok()) return std::move(size).error();
  // The processor then applies its own smart_resize to frames of that size; it must leave it be.
  auto again =
      smart_resize(size->height, size->width, factor, profile.processor_min_pixels, profile.processor_max_pixels);
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

// The keys Qwen3-VL's processor reads, and not both of nframes and fps.
Status qwen3_keys(const VideoRequest& request) {
  const VideoSamplingRequest& s = request.sampling;
  if (s.video_start || s.video_end || request.total_pixels) {
    return Error(ErrorCode::kInvalidArgument,
                 "video: Qwen3-VL's video processor reads no video_start, video_end or total_pixels");
  }
  if (s.nframes && s.fps)
    return Error(ErrorCode::kInvalidArgument, "video: give either \"nframes\" or \"fps\", not both");
  return ok_status();
}

// Qwen3-VL's frame bounds: the item's, else the profile's.
double qwen3_min_frames(const VideoProfile& profile, const VideoSamplingRequest& s) {
  return s.min_frames.value_or(static_cast<double>(profile.min_frames));
}
double qwen3_max_frames(const VideoProfile& profile, const VideoSamplingRequest& s) {
  return s.max_frames.value_or(static_cast<double>(profile.max_frames));
}

Result<VideoPlan> plan_qwen3(const VideoProfile& profile, const VideoInfo& info, const VideoRequest& request,
                             const VideoLimits& limits) {
  MMFEED_RETURN_IF_ERROR(qwen3_keys(request));
  const VideoSamplingRequest& s = request.sampling;
  auto indices = plan_qwen3_video_frames(s.nframes, s.fps.value_or(profile.fps), qwen3_min_frames(profile, s),
                                         qwen3_max_frames(profile, s), info.frames, info.fps, limits.max_frames);
  if (!indices.ok()) return std::move(indices).error();
  VideoPlan plan;
  plan.indices = std::move(indices).value();
  const double min_pixels = request.min_pixels.value_or(static_cast<double>(profile.min_pixels));
  const double max_pixels = request.max_pixels.value_or(static_cast<double>(profile.max_pixels));
  auto size =
      smart_resize_qwen3(static_cast<std::int64_t>(plan.indices.size()), info.height, info.width,
                         profile.model.temporal_patch_size, profile.model.factor(), min_pixels, max_pixels, limits);
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

VideoProfile video_profile(const ModelRow& model) {
  VideoProfile p;
  p.model = model_profile(model);
  p.recipe = model.video;
  const auto f = static_cast<std::int64_t>(p.model.patch_size * kSpatialMerge);
  if (model.video == VideoRecipe::kQwen3) {  // Qwen3-VL's video_preprocessor_config.json
    p.min_pixels = 4096;
    p.max_pixels = 25165824;
  } else {  // qwen-vl-utils' VIDEO_MIN/MAX_TOKEN_NUM and MODEL_SEQ_LEN; the hub's processor bounds
    p.min_pixels = 128 * f * f;
    p.max_pixels = 768 * f * f;
    p.total_pixels = 128000.0 * static_cast<double>(f) * static_cast<double>(f) * 0.9;
    // The Omni processors pass their video processor a size of their own (videos_kwargs):
    // qwen-omni-utils' per-frame bounds, 128 to 768 tokens' pixels.
    p.processor_min_pixels = model.video_bounds_per_frame ? p.min_pixels : p.model.min_pixels;
    p.processor_max_pixels = model.video_bounds_per_frame ? p.max_pixels : p.model.max_pixels;
    p.nominal_seconds = model.nominal_seconds;
  }
  return p;
}

Result<VideoProfile> video_profile(std::string_view name) {
  MMFEED_ASSIGN_OR_RETURN(const ModelRow* model, find_model(name));
  return video_profile(*model);
}

std::size_t resized_bytes(const VideoPlan& plan) {
  return plan.indices.size() * static_cast<std::size_t>(plan.size.width) * static_cast<std::size_t>(plan.size.height) *
         3;
}

double second_per_grid_t(const VideoProfile& profile, const VideoPlan& plan) {
  const double fps = profile.nominal_seconds ? plan.asked_fps : plan.sample_fps;
  return fps > 0 ? profile.model.temporal_patch_size / fps : 0;
}

Result<VideoPlan> plan_video(const VideoProfile& profile, const VideoInfo& info, const VideoRequest& request,
                             const VideoLimits& limits) {
  auto plan = profile.recipe == VideoRecipe::kQwen3 ? plan_qwen3(profile, info, request, limits)
                                                    : plan_qwen_vl_utils(profile, info, request, limits);
  if (!plan.ok()) return plan;
  const int P = profile.model.patch_size;
  const int T = profile.model.temporal_patch_size;
  const auto groups = (static_cast<std::int64_t>(plan->indices.size()) + T - 1) / T;
  plan->grid = Grid{static_cast<int>(groups), plan->size.height / P, plan->size.width / P};
  plan->video_fps = info.fps;
  return plan;
}

Result<std::int64_t> planned_frame_count(const VideoProfile& profile, const VideoInfo& info,
                                         const VideoRequest& request, const VideoLimits& limits) {
  const VideoSamplingRequest& s = request.sampling;
  if (profile.recipe == VideoRecipe::kQwen3) {
    MMFEED_RETURN_IF_ERROR(qwen3_keys(request));
    return qwen3_frame_count(s.nframes, s.fps.value_or(profile.fps), qwen3_min_frames(profile, s),
                             qwen3_max_frames(profile, s), info.frames, info.fps, limits.max_frames);
  }
  // qwen-vl-utils keeps at most the frames in the range, which the container's limit bounds.
  auto frames = plan_qwen2_video_frames(s, info.frames, info.fps);
  if (!frames.ok()) return std::move(frames).error();
  return static_cast<std::int64_t>(frames->indices.size());
}

std::uint64_t min_video_rows(const VideoProfile& profile, std::int64_t frames) {
  const auto T = static_cast<std::uint64_t>(profile.model.temporal_patch_size);
  const auto merged = static_cast<std::uint64_t>(profile.model.merge_size);
  return (static_cast<std::uint64_t>(frames) + T - 1) / T * merged * merged;
}

VideoProcessor::VideoProcessor(VideoProfile profile, Pixels output, ImageKernel kernel)
    : profile_(std::move(profile)),
      output_(output),
      kernel_(kernel),
      table_(profile_.model, ImageBackend::kTorchvision) {}

Result<VideoPlan> VideoProcessor::plan(std::span<const std::byte> bytes, const VideoRequest& request,
                                       const VideoLimits& limits) const {
  auto info = probe_video(bytes, limits);
  if (!info.ok()) return std::move(info).error();
  return plan_video(profile_, *info, request, limits);
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
                    ResizeFilter::kBicubicTorch, kernel_);
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
    patchify_group(slots.data(), group, profile_.model, table_, output_,
                   static_cast<std::uint8_t*>(dest) + g * group_bytes, kernel_);
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
