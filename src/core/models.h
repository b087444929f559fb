// The models the engine prepares data for, one row each: everything that differs between them
// (the image processor's settings, the video recipe, the audio encoder, the default chat template,
// how video positions advance, linear attention). A model name is looked up here once, where it
// enters (LoaderConfig::model, the one-call APIs' `model`); past that the code asks the row.
//
// A new model is one row in models.cc (or, for an embedder or a test, one add_model() call before
// the Loader is made), reusing the recipes the engine has or naming a new one.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(const ModelRow* m, find_model("qwen2.5-vl"));
//   m->image.patch_size       // 14
//   m->tokens_per_second      // 2: mrope steps a video's groups by seconds x 2
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed {

// How a video becomes frames and a size: kQwenVlUtils, qwen-vl-utils' sampling and per-frame /
// per-clip pixel bounds (Qwen2-VL, Qwen2.5-VL, the Omni models); kQwen3, transformers' Qwen3-VL
// video processor (its fps sampling, bounds over the whole clip).
enum class VideoRecipe { kQwenVlUtils, kQwen3 };

// Which audio encoder hears the model's audio (its feature-length rule and padding); kNone: the
// model takes no audio.
enum class AudioEncoder { kNone, kQwen2_5Omni, kQwen3Omni };

// The image processor's preprocessor_config.json values.
struct ImageSettings {
  int patch_size = 14;
  std::array<float, 3> mean{};
  std::array<float, 3> std{};
  std::int64_t min_pixels = 0;
  std::int64_t max_pixels = 0;
};

struct ModelRow {
  std::string name;  // as LoaderConfig::model and the one-call APIs take it
  ImageSettings image;
  VideoRecipe video = VideoRecipe::kQwenVlUtils;
  // kQwenVlUtils: the processor's own video bounds are qwen-omni-utils' per-frame ones (the Omni
  // processors pass them to their video processor), not the image settings'.
  bool video_bounds_per_frame = false;
  // A video's second_per_grid_t counts by the rate its item asks for (Qwen3-Omni's processor),
  // not the rate its frames stand for.
  bool nominal_seconds = false;
  // The position rule for video: mrope steps a video's temporal groups by second_per_grid_t times
  // this (Qwen2.5-VL's vision_config.tokens_per_second, the Omni models' position_id_per_seconds),
  // and batches carry second_per_grid_ts; 0: by one per group (Qwen2-VL), or by the timestamps
  // the template writes (Qwen3-VL, Qwen3.5).
  int tokens_per_second = 0;
  AudioEncoder audio = AudioEncoder::kNone;
  std::string default_template;  // a chat template name (text/chat.h)
  // The text layers include linear attention (Qwen3.5's Gated DeltaNet): packed rows say each
  // token's sequence (BatchLayout::seq_idx).
  bool linear_attention = false;
};

// The row named `name`; kInvalidArgument naming the models there are. The row lives as long as
// the process.
Result<const ModelRow*> find_model(std::string_view name);

// Adds a model (kInvalidArgument: the name is taken or empty). Thread-safe; rows are never removed.
Status add_model(ModelRow row);

// Every model's name, in table order ("qwen2-vl, qwen2.5-vl, ..."), optionally only those that
// take audio.
std::string model_names(bool audio_only = false);

}  // namespace mmfeed
