// Encoding for supervised fine-tuning (chat_encode.cc): a Conversation rendered with its chat
// template (chat.h), tokenized, vision pads expanded to their grids, labels by policy, truncation,
// and optional mrope position ids.
//
// Threads: a function of its arguments; it shares only the Tokenizer, which is safe to share.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(SftSample s, encode_conversation(tokenizer, c, t, grids, {}, {}));
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mmfeed/choices.h"
#include "mmfeed/error.h"
#include "text/chat.h"
#include "text/tokenizer.h"

namespace mmfeed::text {

using ::mmfeed::Labels;  // (mmfeed/choices.h)
using ::mmfeed::Truncation;

struct Grid3 {
  std::int64_t t = 1, h = 0, w = 0;
};

// A video as the text sees it: its grid and what the video processor's plan says of time.
struct VideoGrid {
  Grid3 grid;
  // Qwen2.5-VL's mrope: the temporal position of group t is int(t * second_per_grid_t *
  // tokens_per_second), in float32 as transformers computes it (SftOptions::tokens_per_second).
  double second_per_grid_t = 0;
  // Qwen3-VL: the seconds of each temporal group (grid.t of them). Its templates' videos are
  // written as transformers 5.24's Qwen3VLProcessor writes them: the <|video_pad|> of
  // "<|vision_start|><|video_pad|><|vision_end|>" becomes, per group, "<t.t seconds>" +
  // "<|vision_start|>" + the group's h*w/merge^2 pads + "<|vision_end|>".
  std::vector<double> timestamps;
  // The Omni templates with use_audio_in_video: the audio tokens of the video's soundtrack
  // (AudioFeatures::tokens); 0: the video alone. Its pad becomes the audio start token, the
  // video's tokens and the soundtrack's in the order the model's processor writes them
  // (Qwen2.5-Omni: alternating 2-second chunks; Qwen3-Omni: token by token, a video token before
  // the audio tokens at or after its time), and the audio end token; positions as the model's
  // get_rope_index(use_audio_in_video=True) numbers them, at the model's position_id_per_seconds.
  std::int64_t audio_tokens = 0;
};

struct SftOptions {
  Labels labels = Labels::kQwen;
  std::size_t max_length = 0;  // 0: no limit
  Truncation truncation = Truncation::kError;
  bool mrope_position_ids = false;
  int merge_size = 2;
  // mrope's temporal step for videos: 0 steps by one per group (Qwen2-VL); Qwen2.5-VL's
  // vision_config.tokens_per_second (2) scales VideoGrid::second_per_grid_t. The Omni templates'
  // models always scale it, by their position_id_per_seconds: 0 takes the model's (Qwen2.5-Omni
  // 25, Qwen3-Omni 13), and a video needs its second_per_grid_t there.
  int tokens_per_second = 0;
  // Train the <think> block the Thinking template renders (true by default: with that template
  // the model is asked to produce its reasoning, so the reasoning is part of the reply it learns;
  // the template itself drops reasoning before the last user query, so only the turns it keeps
  // are trained). false leaves "<think>...</think>\n\n" at -100, training only the answer.
  bool train_reasoning = true;
  RenderOptions render;
};

struct SftSample {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> labels;  // -100 where not trained
  std::vector<std::int32_t> attention_mask;
  std::vector<std::int32_t> position_ids;  // 3 x L when asked (rows t, h, w)
  std::size_t images_kept = 0;             // after truncation, the first images_kept images remain
  std::size_t videos_kept = 0;
  std::size_t audios_kept = 0;
  bool truncated = false;  // cut at max_length (Truncation::kTruncate)
};

inline constexpr std::int32_t kIgnoreIndex = -100;

// Renders, tokenizes the whole text (so ids equal the tokenizer applied to the rendered
// conversation, Qwen3-VL's video timestamps written in first), expands each image pad to
// t*h*w/merge^2 tokens, each video pad likewise (per group with timestamps), each audio pad
// (the Omni templates) to its clip's audio_tokens (what the model's encoder makes of the clip:
// AudioFeatures::tokens), and labels by policy (media tokens and timestamps never trained).
// Positions are the models' get_rope_index: an audio block is numbered like text; Qwen3-Omni's
// are float32 in transformers, and a video whose temporal positions are not whole there (an fps
// where 2 / fps x 13 is fractional) is refused rather than rounded. Under max_length the text is tokenized
// only as far as the outcome needs, so a sample of megabytes holds memory for its first tokens
// only: refused, it is counted to twice max_length ("conversation has more than N tokens, more
// than max_length M (counted no further)" beyond that); truncated, to just past the cut.
Result<SftSample> encode_conversation(const Tokenizer& tokenizer, const Conversation& conversation, ChatTemplate tmpl,
                                      std::span<const Grid3> image_grids, std::span<const VideoGrid> videos,
                                      std::span<const std::int64_t> audio_tokens, const SftOptions& options = {});

}  // namespace mmfeed::text
