#include "core/models.h"

#include <deque>
#include <mutex>
#include <utility>

namespace mmfeed {

namespace {

// CLIP's mean and std (Qwen2-VL, Qwen2.5-VL and Qwen2.5-Omni's image processors).
constexpr std::array<float, 3> kClipMean = {0.48145466f, 0.4578275f, 0.40821073f};
constexpr std::array<float, 3> kClipStd = {0.26862954f, 0.26130258f, 0.27577711f};
constexpr std::array<float, 3> kHalf = {0.5f, 0.5f, 0.5f};

constexpr ImageSettings kQwen2VlImages{14, kClipMean, kClipStd, 3136, 12845056};
constexpr ImageSettings kQwen3VlImages{16, kHalf, kHalf, 65536, 16777216};

std::deque<ModelRow> builtin_models() {
  std::deque<ModelRow> rows;
  rows.push_back({.name = "qwen2-vl", .image = kQwen2VlImages, .default_template = "qwen2-vl"});
  rows.push_back(
      {.name = "qwen2.5-vl", .image = kQwen2VlImages, .tokens_per_second = 2, .default_template = "qwen2.5-vl"});
  // Qwen3-VL's video_preprocessor_config.json.
  rows.push_back(
      {.name = "qwen3-vl", .image = kQwen3VlImages, .video = VideoRecipe::kQwen3, .default_template = "qwen3-vl"});
  // Qwen3.5: Qwen3VLProcessor with Qwen3-VL's settings; Gated DeltaNet layers.
  rows.push_back({.name = "qwen3.5",
                  .image = kQwen3VlImages,
                  .video = VideoRecipe::kQwen3,
                  .default_template = "qwen3.5",
                  .linear_attention = true});
  // Qwen2.5-Omni's thinker sees with Qwen2.5-VL's vision tower and image processor settings.
  rows.push_back({.name = "qwen2.5-omni",
                  .image = kQwen2VlImages,
                  .video_bounds_per_frame = true,
                  .tokens_per_second = 25,
                  .audio = AudioEncoder::kQwen2_5Omni,
                  .default_template = "qwen2.5-omni"});
  // Qwen3-Omni's preprocessor_config.json: Qwen2VLImageProcessor at patch 16 with Qwen2-VL's
  // pixel bounds and a mean and std of 0.5. Its Thinking template is the only published copy of
  // its templates that two sources agree on.
  rows.push_back({.name = "qwen3-omni",
                  .image = {16, kHalf, kHalf, 3136, 12845056},
                  .video_bounds_per_frame = true,
                  .nominal_seconds = true,
                  .tokens_per_second = 13,
                  .audio = AudioEncoder::kQwen3Omni,
                  .default_template = "qwen3-omni-thinking"});
  return rows;
}

struct Table {
  std::mutex mu;
  std::deque<ModelRow> rows = builtin_models();  // a deque: rows stay where they are as it grows
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

Result<const ModelRow*> find_model(std::string_view name) {
  Table& t = table();
  {
    const std::lock_guard<std::mutex> lock(t.mu);
    for (const ModelRow& row : t.rows) {
      if (row.name == name) return &row;
    }
  }
  return Error(ErrorCode::kInvalidArgument, "unknown model '" + std::string(name) + "' (known: " + model_names() + ")");
}

Status add_model(ModelRow row) {
  if (row.name.empty()) return Error(ErrorCode::kInvalidArgument, "a model needs a name");
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mu);
  for (const ModelRow& existing : t.rows) {
    if (existing.name == row.name) {
      return Error(ErrorCode::kInvalidArgument, "model '" + row.name + "' is already in the table");
    }
  }
  t.rows.push_back(std::move(row));
  return ok_status();
}

std::string model_names(bool audio_only) {
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mu);
  std::string out;
  for (const ModelRow& row : t.rows) {
    if (audio_only && row.audio == AudioEncoder::kNone) continue;
    out += (out.empty() ? "" : ", ") + row.name;
  }
  return out;
}

}  // namespace mmfeed
