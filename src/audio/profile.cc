#include "audio/profile.h"

#include <string>

namespace mmfeed::audio {

namespace {

// Python's floor division (the formulas below reach negative numerators).
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// Qwen2_5OmniAudioEncoder._get_feat_extract_output_lengths: a stride-2 convolution, then
// 2x pooling.
std::int64_t qwen2_5_omni_tokens(std::int64_t frames) {
  const std::int64_t convolved = floor_div(frames - 1, 2) + 1;
  return floor_div(convolved - 2, 2) + 1;
}

// Qwen3-Omni's encoder: 100-frame windows make 13 tokens each (three stride-2 convolutions);
// the remainder what the convolutions leave of it.
std::int64_t qwen3_omni_tokens(std::int64_t frames) {
  const std::int64_t rest = frames % 100;
  const std::int64_t once = floor_div(rest - 1, 2) + 1;
  const std::int64_t twice = floor_div(once - 1, 2) + 1;
  return floor_div(twice - 1, 2) + 1 + (frames / 100) * 13;
}

}  // namespace

std::optional<AudioModel> audio_model(const ModelRow& model) {
  switch (model.audio) {
    case AudioEncoder::kNone: return std::nullopt;
    case AudioEncoder::kQwen2_5Omni: return AudioModel{model.name, false, &qwen2_5_omni_tokens};
    case AudioEncoder::kQwen3Omni: return AudioModel{model.name, true, &qwen3_omni_tokens};
  }
  return std::nullopt;
}

Result<AudioModel> audio_model(std::string_view name) {
  MMFEED_ASSIGN_OR_RETURN(const ModelRow* model, find_model(name));
  if (auto audio = audio_model(*model)) return *audio;
  return Error(ErrorCode::kInvalidArgument,
               "audio: model '" + std::string(name) + "' takes no audio (audio models: " + model_names(true) + ")");
}

}  // namespace mmfeed::audio
