// Model profiles (a model's image settings, from its row in core/models.h) and smart_resize, the rule that picks the
// resized height and width: both multiples of patch * merge, the pixel count within
// [min_pixels, max_pixels], the aspect ratio kept as closely as possible. Computed exactly as
// the reference (Python's round-half-to-even, double precision, left to right).
//
// Example:
//   auto profile = model_profile("qwen2-vl").value();        // hub config: 3136 .. 12845056
//   auto size = smart_resize(768, 1024, profile).value();      // {756, 1036}
//   Grid grid = grid_for(size, profile);                       // {1, 54, 74}: 3996 rows, 999 tokens
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/models.h"
#include "mmfeed/error.h"

namespace mmfeed::vision {

struct ModelProfile {
  std::string name;
  int patch_size = 14;
  int merge_size = 2;
  int temporal_patch_size = 2;
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  std::int64_t min_pixels = 0;
  std::int64_t max_pixels = 0;

  int factor() const { return patch_size * merge_size; }
  // Width of one pixel_values row: C * T * P * P (1176 for P=14, 1536 for P=16).
  int row_width() const { return 3 * temporal_patch_size * patch_size * patch_size; }
};

// A model's image settings (its row's hub-config values), or by name: kInvalidArgument for a model
// the table lacks.
ModelProfile model_profile(const ModelRow& model);
Result<ModelProfile> model_profile(std::string_view name);

struct Size {
  int height = 0;
  int width = 0;
};

// kInvalidArgument when the aspect ratio exceeds 200 (as the reference raises) or a side is 0.
Result<Size> smart_resize(int height, int width, int factor, std::int64_t min_pixels, std::int64_t max_pixels);
inline Result<Size> smart_resize(int height, int width, const ModelProfile& p) {
  return smart_resize(height, width, p.factor(), p.min_pixels, p.max_pixels);
}

struct Grid {
  int t = 1;
  int h = 0;  // patches down
  int w = 0;  // patches across

  std::int64_t rows() const { return static_cast<std::int64_t>(t) * h * w; }
  // Tokens the language model sees: rows / merge^2.
  std::int64_t tokens(int merge_size) const { return rows() / (merge_size * merge_size); }
};

inline Grid grid_for(Size s, const ModelProfile& p) { return {1, s.height / p.patch_size, s.width / p.patch_size}; }

}  // namespace mmfeed::vision
