// The Omni models' audio settings: how their processors pad the clips of one call, and how many
// audio tokens their encoders make of a clip's feature frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/models.h"
#include "mmfeed/error.h"

namespace mmfeed::audio {

// Every clip padded (and cut) to this many samples when the padding is a fixed length: the
// extractors' n_samples (chunk_length 300 s at 16 kHz).
inline constexpr std::size_t kFixedSamples = 4'800'000;

struct AudioModel {
  std::string_view name;
  bool pads_to_longest = false;  // the processor's own padding: the longest clip (Qwen3-Omni) or kFixedSamples
  std::int64_t (*tokens)(std::int64_t frames) = nullptr;
};

// A model's audio encoder; nullopt: the model takes no audio. By name: kInvalidArgument for a
// model the table lacks or one without audio, naming the models that take it.
std::optional<AudioModel> audio_model(const ModelRow& model);
Result<AudioModel> audio_model(std::string_view name);

}  // namespace mmfeed::audio
