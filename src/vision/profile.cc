#include "vision/profile.h"

#include <algorithm>
#include <cmath>

namespace mmfeed::vision {

ModelProfile model_profile(const ModelRow& model) {
  ModelProfile p;
  p.name = model.name;
  p.patch_size = model.image.patch_size;
  p.mean = model.image.mean;
  p.std = model.image.std;
  p.min_pixels = model.image.min_pixels;
  p.max_pixels = model.image.max_pixels;
  return p;
}

Result<ModelProfile> model_profile(std::string_view name) {
  MMFEED_ASSIGN_OR_RETURN(const ModelRow* model, find_model(name));
  return model_profile(*model);
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
