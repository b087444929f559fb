// Text as the Loader makes it, one call at a time: the model's tokenizer (a tokenizer.json), its
// chat templates rendered byte for byte as transformers' apply_chat_template, and one sample's
// conversation encoded for supervised fine-tuning (vision pads expanded to their grids, labels,
// truncation, mrope positions), exactly as the Loader encodes each sample.
//
// A sample is given as its manifest line (JSON): `messages` in the OpenAI / Qwen form, or the
// LLaVA, ShareGPT, Alpaca and TRL forms the Loader reads (docs/data.md).
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_file("tokenizer.json"));
//   MMFEED_ASSIGN_OR_RETURN(std::vector<std::int32_t> ids, tok.encode("Hello"));
//   EncodeOptions o;
//   o.chat_template = "qwen3-vl";
//   o.image_grids = {{1, 16, 16}};  // image_grid_thw of the sample's one image
//   MMFEED_ASSIGN_OR_RETURN(EncodedSample s, encode_conversation(tok, line, o));
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/choices.h"
#include "mmfeed/error.h"

namespace mmfeed {

namespace text {
class Tokenizer;  // the engine's
}  // namespace text
struct EncodeOptions;
struct EncodedSample;

// A byte-level BPE tokenizer read from a tokenizer.json (the Qwen family's), its ids equal to the
// `tokenizers` library's. A handle: copies share one loaded tokenizer; every method is thread-safe.
class Tokenizer {
 public:
  // Reads a tokenizer.json. kNotFound for a missing file; kUnsupported names a feature outside
  // what is implemented (another model type, byte fallback, dropout, ...).
  static Result<Tokenizer> from_file(const std::string& path);
  static Result<Tokenizer> from_json(std::string_view json);

  // kInvalidArgument on text that is not valid UTF-8.
  Result<std::vector<std::int32_t>> encode(std::string_view text) const;
  // Each text's ids, encoded on up to `threads` threads; an error names the text by index.
  Result<std::vector<std::vector<std::int32_t>>> encode_batch(std::span<const std::string> texts, int threads) const;
  // The tokens' bytes, concatenated; invalid UTF-8 replaced by U+FFFD as `tokenizers` does.
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = false) const;
  // The id of a vocabulary or added token, or nullopt.
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  std::size_t vocab_size() const;  // added tokens included

 private:
  friend Result<EncodedSample> encode_conversation(const Tokenizer&, std::string_view, const EncodeOptions&);
  explicit Tokenizer(std::shared_ptr<const text::Tokenizer> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const text::Tokenizer> impl_;
};

// A chat template: "qwen2-vl" (also "qwen2.5-vl"), "qwen3-vl", "qwen3-vl-thinking", "qwen3.5"
// (Qwen3.5 4B and larger), "qwen3.5-nothink" (2B and smaller), "qwen2.5-omni" and
// "qwen3-omni-thinking" (rendered and encoded; the Loader does not take it yet), or a file
// holding one of those templates' exact text (.jinja, or a chat_template.json /
// tokenizer_config.json); anything else is refused (kUnsupported): mmfeed renders only templates
// it reproduces exactly.
struct RenderOptions {
  std::string chat_template = "qwen2-vl";
  bool add_generation_prompt = false;
  bool add_vision_id = false;  // "Picture N: " / "Video N: " before each medium
  // Qwen3.5's generation prompt with or without thinking; nullopt: the template's default.
  // Qwen3-Omni Thinking writes an empty think block after it when false.
  std::optional<bool> enable_thinking{};
  bool add_audio_id = false;  // "Audio N: " before each audio item (qwen2.5-omni)
};

// The sample's conversation (its manifest line) as apply_chat_template renders it, byte for byte.
Result<std::string> render_chat(std::string_view sample_json, const RenderOptions& options);

struct EncodeOptions {
  std::string chat_template = "qwen2-vl";  // as RenderOptions takes it
  bool add_vision_id = false;
  std::vector<GridThw> image_grids;  // one per image of the sample, in order
  std::vector<GridThw> video_grids;  // one per video
  // Qwen2.5-VL: per video, the seconds one temporal group spans (its mrope temporal step is
  // int(t * second_per_grid_t * tokens_per_second)); empty: none.
  std::vector<double> second_per_grid_ts;
  // Qwen3-VL: per video, the seconds of each temporal group (written into the text); empty: none.
  std::vector<std::vector<double>> video_timestamps;
  // The Omni templates: per audio item, the audio tokens its clip makes (AudioFeatures::tokens).
  std::vector<std::int64_t> audio_tokens;
  // The Omni templates with use_audio_in_video: per video, the audio tokens of its soundtrack (0:
  // the video alone, as for a silent one); empty: none. Each such video's tokens and its
  // soundtrack's are interleaved between the audio start and end tokens as the model's processor
  // writes them (Qwen2.5-Omni: 2-second chunks; Qwen3-Omni: by time, token by token); positions
  // as the model's get_rope_index numbers them.
  std::vector<std::int64_t> video_audio_tokens;
  // Qwen2.5-VL's vision_config.tokens_per_second (2); 0: Qwen2/3-VL, and the Omni models' own
  // position_id_per_seconds (Qwen2.5-Omni 25, Qwen3-Omni 13), which need second_per_grid_ts.
  int tokens_per_second = 0;
  int merge_size = 2;          // the vision model's spatial merge
  std::size_t max_length = 0;  // tokens; 0: no limit
  Truncation truncation = Truncation::kError;
  Labels labels = Labels::kQwen;
  bool mrope = true;  // position_ids (3 x L)
  bool train_reasoning = true;
};

struct EncodedSample {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> labels;  // -100 where not trained
  std::vector<std::int32_t> attention_mask;
  std::vector<std::int32_t> position_ids;  // 3 x L (rows t, h, w) with mrope; else empty
  std::size_t images_kept = 0;             // after truncation, the first images_kept images remain
  std::size_t videos_kept = 0;
  std::size_t audios_kept = 0;
};

// The sample rendered with its template, tokenized, each image and video pad expanded to its
// grid's tokens and each audio pad to its clip's, labelled (assistant replies; media tokens
// never), truncated or refused at max_length, with mrope positions (the models'
// get_rope_index): the Loader's text for the sample.
Result<EncodedSample> encode_conversation(const Tokenizer& tokenizer, std::string_view sample_json,
                                          const EncodeOptions& options);

}  // namespace mmfeed
