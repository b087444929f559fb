#include "vision/profile.h"

#include <algorithm>
#include <cmath>

namespace mmfeed::vision {

Result<ModelProfile> model_profile(std::string_view name) {
  constexpr std::array<float, 3> kClipMean = {0.48145466f, 0.4578275f, 0.40821073f};
  constexpr std::array<float, 3> kClipStd = {0.26862954f, 0.26130258f, 0.27577711f};
  ModelProfile p;
  p.name = std::string(name);
  // Qwen2.5-Omni's thinker sees with Qwen2.5-VL's vision tower and image processor settings.
  if (name == "qwen2-vl" || name == "qwen2.5-vl" || name == "qwen2.5-omni") {
    p.patch_size = 14;
    p.mean = kClipMean;
    p.std = kClipStd;
    p.min_pixels = 3136;
    p.max_pixels = 12845056;
  } else if (name == "qwen3-vl" || name == "qwen3.5") {  // Qwen3.5: Qwen3VLProcessor, Qwen3-VL's settings
    p.patch_size = 16;
    p.mean = {0.5f, 0.5f, 0.5f};
    p.std = {0.5f, 0.5f, 0.5f};
    p.min_pixels = 65536;
    p.max_pixels = 16777216;
  } else if (name == "qwen3-omni") {
    // Qwen3-Omni's preprocessor_config.json: Qwen2VLImageProcessor at patch 16 with Qwen2-VL's
    // pixel bounds and a mean and std of 0.5.
    p.patch_size = 16;
    p.mean = {0.5f, 0.5f, 0.5f};
    p.std = {0.5f, 0.5f, 0.5f};
    p.min_pixels = 3136;
    p.max_pixels = 12845056;
  } else {
    return Error(ErrorCode::kInvalidArgument,
                 "unknown model profile '" + std::string(name) +
                     "' (known: qwen2-vl, qwen2.5-vl, qwen3-vl, qwen3.5, qwen2.5-omni, qwen3-omni)");
  }
  return p;
}

Result<Size> smart_resize(int height, int width, int factor, std::int64_t min_pixels, std::int64_t max_pixels) {
  if (height <= 0 || width <= 0) {
    return Error(ErrorCode::kInvalidArgument,
                 "image of " + std::to_string(width) + "x" + std::to_string(height) + " has no pixels");
  }
  const double ratio = static_cast<double>(std::max(height, width)) / std::min(height, width);
  if (ratio > 200) {
    return Error(ErrorCode::kInvalidArgument, "absolute aspect ratio must be smaller than 200, got " +
                                                  std::to_string(ratio) + " (" + std::to_string(width) + "x" +
                                                  std::to_string(height) + ")");
  }
  // Python's round() is round-half-to-even, which nearbyint does in the default rounding mode.
  std::int64_t h_bar = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(height) / factor)) * factor;
  std::int64_t w_bar = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(width) / factor)) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta =
        std::sqrt(static_cast<double>(static_cast<std::int64_t>(height) * width) / static_cast<double>(max_pixels));
    h_bar = std::max<std::int64_t>(factor, static_cast<std::int64_t>(std::floor(height / beta / factor)) * factor);
    w_bar = std::max<std::int64_t>(factor, static_cast<std::int64_t>(std::floor(width / beta / factor)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (static_cast<double>(height) * width));
    h_bar = static_cast<std::int64_t>(std::ceil(height * beta / factor)) * factor;
    w_bar = static_cast<std::int64_t>(std::ceil(width * beta / factor)) * factor;
  }
  return Size{static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

}  // namespace mmfeed::vision
