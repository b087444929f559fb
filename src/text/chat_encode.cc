// A rendered conversation encoded for supervised fine-tuning: tokenized in one piece, each vision
// pad expanded to its grid's tokens, labels by policy from the rendered spans (the loss mask),
// truncation that never cuts a vision block, and optional mrope position ids. Rendering is in
// chat.cc, parsing in conversation.cc. One stage in one file of about 640 lines: a video's
// soundtrack (the Omni models' use_audio_in_video) is written by the same token pass that expands
// the pads and numbered by the same position pass, and its order is decided once for both here.
#include "text/chat_encode.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace mmfeed::text {

namespace {

// "<t.t seconds>": Python's f"<{t:.1f} seconds>" (both round the double's exact value, ties to even).
std::string seconds_label(double t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "<%.1f seconds>", t);
  return buf;
}

// Qwen3-VL's video text: each video's <|video_pad|> becomes its groups, each "<t.t seconds>"
// and a block of one pad. Returns the insertions (where in the old text, how much longer).
struct Insertion {
  std::size_t at;     // offset of the replaced pad in the old text
  std::size_t grown;  // the replacement's length minus the pad's
};

std::vector<Insertion> write_timestamps(std::string& text, std::span<const VideoGrid> videos) {
  constexpr std::string_view kPad = "<|video_pad|>";
  const std::size_t pad_in_block = kVideoBlock.find(kPad);
  std::string out;
  std::vector<Insertion> insertions;
  std::size_t from = 0, video = 0;
  for (std::size_t at = text.find(kVideoBlock); at != std::string::npos;
       at = text.find(kVideoBlock, at + kVideoBlock.size())) {
    const std::size_t pad = at + pad_in_block;
    std::string groups;
    for (double t : videos[video++].timestamps) {
      groups += seconds_label(t);
      groups += kVideoBlock;
    }
    out.append(text, from, pad - from);
    out += groups;
    from = pad + kPad.size();
    insertions.push_back({pad, groups.size() - kPad.size()});
  }
  out.append(text, from, std::string::npos);
  text = std::move(out);
  return insertions;
}

// Offsets in the tokenized text (timestamps written in) mapped back to the rendering's: one
// inside written text maps to its video's place. Asked with non-decreasing offsets (tokens come
// in order), it walks the insertions once for all tokens.
class RenderedOffsets {
 public:
  explicit RenderedOffsets(std::span<const Insertion> insertions) : insertions_(insertions) {}

  std::size_t operator()(std::size_t at) {
    while (next_ < insertions_.size() && at >= insertions_[next_].at + shift_ + insertions_[next_].grown) {
      shift_ += insertions_[next_++].grown;
    }
    if (next_ < insertions_.size() && at >= insertions_[next_].at + shift_) return insertions_[next_].at;
    return at - shift_;
  }

 private:
  std::span<const Insertion> insertions_;
  std::size_t next_ = 0;   // the first insertion not wholly before the last offset asked
  std::size_t shift_ = 0;  // what the insertions before it added
};

// Whether a rendered offset is trained, by policy. Asked with non-decreasing offsets, it walks
// the assistant turns once for all tokens (issue 31: searching them from the first for every
// token made encoding quadratic in the turns, 44 s for 64,000).
class LossMask {
 public:
  LossMask(const Rendered& r, const SftOptions& options)
      : r_(r),
        end_len_(options.labels == Labels::kQwen ? 11 : 10),  // "<|im_end|>" (+ "\n")
        train_reasoning_(options.train_reasoning) {}

  bool operator()(std::size_t at) {
    // Turns are rendered in order and do not overlap: only the first not yet behind `at` can hold it.
    while (turn_ < r_.assistant_end.size() && at >= r_.assistant_end[turn_].begin + end_len_) ++turn_;
    if (turn_ == r_.assistant_end.size()) return false;
    const ByteSpan think = r_.assistant_think[turn_], content = r_.assistant_content[turn_];
    if (!train_reasoning_ && at >= think.begin && at < think.end) return false;
    return (at >= content.begin && at < content.end) || at >= r_.assistant_end[turn_].begin;
  }

 private:
  const Rendered& r_;
  std::size_t end_len_;
  bool train_reasoning_;
  std::size_t turn_ = 0;
};

// A size from the caller bounded before it sizes memory: a grid's side, a clip's audio tokens.
constexpr std::int64_t kMaxGridSide = 1 << 20;
constexpr std::int64_t kMaxMediaTokens = 1 << 26;
constexpr double kMaxSecondsPerGroup = 3600;

// The Omni models' position_id_per_seconds, for SftOptions::tokens_per_second 0.
int model_tokens_per_second(ChatTemplate tmpl) {
  switch (tmpl) {
    case ChatTemplate::kQwen2_5Omni: return 25;
    case ChatTemplate::kQwen3OmniThinking: return 13;
    default: return 0;
  }
}

// Whether the template writes each video group's time before it (Qwen3-VL's and Qwen3.5's).
bool timestamps_videos(ChatTemplate tmpl) {
  return tmpl == ChatTemplate::kQwen3VL || tmpl == ChatTemplate::kQwen3VLThinking || tmpl == ChatTemplate::kQwen3_5 ||
         tmpl == ChatTemplate::kQwen3_5NoThink;
}

// Qwen2.5-Omni's chunks of a video with its soundtrack: 2 seconds at 25 positions a second.
constexpr std::int64_t kOmniChunk = 50;

// transformers' get_chunked_index: token i closes the running chunk and opens the next when its
// value reaches (chunks so far) x per_chunk, one chunk a token at most; [begin, end) of each.
template <class Value>
std::vector<std::pair<std::size_t, std::size_t>> chunked(std::size_t n, std::int64_t per_chunk, Value value) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t begin = 0;
  std::int64_t chunk = 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (value(i) >= static_cast<double>(chunk * per_chunk)) {
      out.emplace_back(begin, i);
      begin = i;
      ++chunk;
    }
  }
  out.emplace_back(begin, n);
  return out;
}

// A run of a video-with-soundtrack block: `count` of the video's (or the soundtrack's) tokens
// from its `first`.
struct Piece {
  bool video = false;
  std::size_t first = 0, count = 0;
};

// A video and its soundtrack as one block: its size, and each token's temporal value.
struct Soundtrack {
  std::size_t per_group = 0, video = 0, audio = 0;  // tokens: per temporal group, the video's, the soundtrack's
  double second_per_grid = 0;
  double per_second = 0;  // the model's position_id_per_seconds
  // The processor's value of video token i (float64) and the model's temporal position (float32;
  // Qwen2.5-Omni truncates it).
  double text_value(std::size_t i) const { return static_cast<double>(i / per_group) * second_per_grid * per_second; }
  float model_value(std::size_t i) const {
    return static_cast<float>(i / per_group) * static_cast<float>(second_per_grid) * static_cast<float>(per_second);
  }
};

Soundtrack soundtrack_of(const VideoGrid& v, std::int64_t merge2, ChatTemplate tmpl) {
  Soundtrack s;
  s.per_group = static_cast<std::size_t>(v.grid.h * v.grid.w / merge2);
  s.video = s.per_group * static_cast<std::size_t>(v.grid.t);
  s.audio = static_cast<std::size_t>(v.audio_tokens);
  s.second_per_grid = v.second_per_grid_t;
  s.per_second = model_tokens_per_second(tmpl);
  return s;
}

// Qwen2.5-Omni: the video's chunks and the soundtrack's alternate, each 2 seconds.
std::vector<Piece> alternate(std::size_t audio, const std::vector<std::pair<std::size_t, std::size_t>>& video_chunks) {
  const auto audio_chunks = chunked(audio, kOmniChunk, [](std::size_t i) { return static_cast<double>(i); });
  std::vector<Piece> out;
  for (std::size_t j = 0; j < std::max(video_chunks.size(), audio_chunks.size()); ++j) {
    if (j < video_chunks.size()) {
      out.push_back({true, video_chunks[j].first, video_chunks[j].second - video_chunks[j].first});
    }
    if (j < audio_chunks.size()) {
      out.push_back({false, audio_chunks[j].first, audio_chunks[j].second - audio_chunks[j].first});
    }
  }
  return out;
}

// Qwen3-Omni: token by token, a video token first while its time is at most the next audio
// token's index; then what remains of each. `single`: each merged token its own piece (the
// model's get_rope_index appends them so); else runs.
template <class Value>
std::vector<Piece> merged(const Soundtrack& s, Value value, bool single) {
  std::vector<Piece> out;
  const auto add = [&](bool video, std::size_t first, std::size_t count) {
    if (!single && !out.empty() && out.back().video == video) {
      out.back().count += count;
    } else {
      out.push_back({video, first, count});
    }
  };
  std::size_t v = 0, a = 0;
  while (v < s.video && a < s.audio) {
    if (value(v) <= static_cast<double>(a)) {
      add(true, v++, 1);
    } else {
      add(false, a++, 1);
    }
  }
  if (v < s.video) out.push_back({true, v, s.video - v});
  if (a < s.audio) out.push_back({false, a, s.audio - a});
  return out;
}

// The block's tokens in the order the model's processor writes them (its replace_video_with_audio_token).
std::vector<Piece> text_order(const Soundtrack& s, ChatTemplate tmpl) {
  const auto value = [&](std::size_t i) { return s.text_value(i); };
  if (tmpl == ChatTemplate::kQwen2_5Omni) return alternate(s.audio, chunked(s.video, kOmniChunk, value));
  return merged(s, value, /*single=*/false);
}

// The same tokens as the model's get_rope_index(use_audio_in_video=True) places their positions.
std::vector<Piece> model_order(const Soundtrack& s, ChatTemplate tmpl) {
  if (tmpl == ChatTemplate::kQwen2_5Omni) {
    return alternate(s.audio, chunked(s.video, kOmniChunk, [&](std::size_t i) {
                       return static_cast<double>(static_cast<std::int64_t>(s.model_value(i)));
                     }));
  }
  return merged(
      s, [&](std::size_t i) { return static_cast<double>(s.model_value(i)); }, /*single=*/true);
}

// Positions of a video block with its soundtrack, as the model's get_rope_index
// (use_audio_in_video=True) numbers it: the vision bos took next_pos - 1; the audio bos at `at`
// shares it (Qwen2.5-Omni) or follows it (Qwen3-Omni); the video's tokens walk (t, h, w) from the
// next position and the soundtrack's count from it, in the model's order; the audio eos and the
// vision eos come past the largest position of the piece placed last, sharing one (Qwen2.5-Omni)
// or one after the other. Returns the index after the vision eos; next_pos moves past it.
std::size_t soundtrack_positions(const VideoGrid& v, ChatTemplate tmpl, std::int64_t merge, std::int64_t& next_pos,
                                 std::size_t at, std::vector<std::int32_t>& positions, std::size_t L) {
  const auto put = [&](std::size_t i, std::int64_t t, std::int64_t h, std::int64_t w) {
    positions[0 * L + i] = static_cast<std::int32_t>(t);
    positions[1 * L + i] = static_cast<std::int32_t>(h);
    positions[2 * L + i] = static_cast<std::int32_t>(w);
  };
  const bool shared = tmpl == ChatTemplate::kQwen2_5Omni;  // the two bos (and eos) share a position
  const std::int64_t bos = shared ? next_pos - 1 : next_pos;
  put(at++, bos, bos, bos);
  const std::int64_t st = bos + 1;
  const Soundtrack s = soundtrack_of(v, merge * merge, tmpl);
  const std::int64_t gw = v.grid.w / merge;
  std::int64_t last_max = st - 1;  // the largest position of the piece placed last
  for (const Piece& piece : model_order(s, tmpl)) {
    if (!piece.video) {
      for (std::size_t a = piece.first; a < piece.first + piece.count; ++a) {
        const std::int64_t p = st + static_cast<std::int64_t>(a);
        put(at++, p, p, p);
      }
      last_max = st + static_cast<std::int64_t>(piece.first + piece.count) - 1;
      continue;
    }
    last_max = st - 1;
    for (std::size_t q = piece.first; q < piece.first + piece.count; ++q) {
      // Whole where it matters: Qwen2.5-Omni truncates, Qwen3-Omni's fractional ones are refused.
      const auto t = static_cast<std::int64_t>(s.model_value(q));
      const auto hw = static_cast<std::int64_t>(q % s.per_group);
      put(at++, st + t, st + hw / gw, st + hw % gw);
      last_max = std::max({last_max, st + t, st + hw / gw, st + hw % gw});
    }
  }
  const std::int64_t eos = last_max + 1, second_eos = shared ? eos : eos + 1;
  put(at++, eos, eos, eos);                       // <|audio_eos|> / <|audio_end|>
  put(at++, second_eos, second_eos, second_eos);  // <|vision_eos|> / <|vision_end|>
  next_pos = second_eos + 1;
  return at;
}

// Qwen3-Omni's float position of a video's temporal group t that is not whole, refused.
Error fractional_position(std::size_t video, std::int64_t t, float at, double second_per_grid) {
  char where[160];
  std::snprintf(where, sizeof where, "sits at %g past its start (%g s per group x 13 per second)", at, second_per_grid);
  return Error(ErrorCode::kInvalidArgument,
               "video " + std::to_string(video) + "'s temporal group " + std::to_string(t) + " " + where +
                   " in Qwen3-Omni's positions, not a whole number: mmfeed's positions are integers; sample the "
                   "video at an fps where 2 / fps x 13 is whole (2, qwen-omni-utils' default, or 1)");
}

std::string grid_text(const Grid3& g) {
  return "(" + std::to_string(g.t) + ", " + std::to_string(g.h) + ", " + std::to_string(g.w) + ")";
}

}  // namespace

Result<SftSample> encode_conversation(const Tokenizer& tok, const Conversation& c, ChatTemplate tmpl,
                                      std::span<const Grid3> image_grids, std::span<const VideoGrid> videos,
                                      std::span<const std::int64_t> audio_tokens, const SftOptions& options) {
  const std::size_t n_images = c.count(ContentItem::Type::kImage);
  const std::size_t n_videos = c.count(ContentItem::Type::kVideo);
  const std::size_t n_audios = c.count(ContentItem::Type::kAudio);
  if (n_audios > 0 && !takes_audio(tmpl)) {
    return Error(ErrorCode::kUnsupported, "the conversation holds audio, which only an Omni template encodes");
  }
  if (n_images != image_grids.size()) {
    return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_images) + " images but " +
                                                  std::to_string(image_grids.size()) + " image grids were given");
  }
  if (n_videos != videos.size()) {
    return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_videos) + " videos but " +
                                                  std::to_string(videos.size()) + " video grids were given");
  }
  if (n_audios != audio_tokens.size()) {
    return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_audios) + " audio clips but " +
                                                  std::to_string(audio_tokens.size()) +
                                                  " audio token counts were given");
  }
  for (std::size_t k = 0; k < audio_tokens.size(); ++k) {
    if (audio_tokens[k] < 1 || audio_tokens[k] > kMaxMediaTokens) {
      return Error(ErrorCode::kInvalidArgument, "audio clip " + std::to_string(k) + " has " +
                                                    std::to_string(audio_tokens[k]) + " audio tokens, not in [1, " +
                                                    std::to_string(kMaxMediaTokens) + "]");
    }
  }
  for (std::size_t k = 0; k < videos.size(); ++k) {
    const VideoGrid& v = videos[k];
    if (v.audio_tokens == 0) continue;
    if (!takes_audio(tmpl)) {
      return Error(ErrorCode::kInvalidArgument, "video " + std::to_string(k) +
                                                    " brings its soundtrack (use_audio_in_video), which only an "
                                                    "Omni template encodes, not " +
                                                    std::string(chat_template_name(tmpl)));
    }
    if (v.audio_tokens < 0 || v.audio_tokens > kMaxMediaTokens) {
      return Error(ErrorCode::kInvalidArgument, "video " + std::to_string(k) + "'s soundtrack has " +
                                                    std::to_string(v.audio_tokens) + " audio tokens, not in [0, " +
                                                    std::to_string(kMaxMediaTokens) + "]");
    }
    if (!(v.second_per_grid_t > 0 && v.second_per_grid_t <= kMaxSecondsPerGroup)) {
      return Error(ErrorCode::kInvalidArgument,
                   "video " + std::to_string(k) + " with its soundtrack needs second_per_grid_t in (0, " +
                       std::to_string(kMaxSecondsPerGroup) + "] (temporal_patch_size / fps), which interleaves them");
    }
    if (tmpl == ChatTemplate::kQwen3OmniThinking && options.mrope_position_ids) {  // the merge compares them too
      for (std::int64_t t = 0; t < std::min(v.grid.t, kMaxGridSide); ++t) {        // a larger grid is refused below
        const float at = static_cast<float>(t) * static_cast<float>(v.second_per_grid_t) *
                         static_cast<float>(model_tokens_per_second(tmpl));
        if (at != std::trunc(at)) return fractional_position(k, t, at, v.second_per_grid_t);
      }
    }
  }
  const bool timestamped = timestamps_videos(tmpl);
  std::vector<Grid3> video_grids;  // one per video pad in the text: per group when timestamped
  for (std::size_t k = 0; k < videos.size(); ++k) {
    const VideoGrid& v = videos[k];
    if (!timestamped || static_cast<std::int64_t>(v.timestamps.size()) != v.grid.t) {
      video_grids.push_back(v.grid);  // a mismatch is reported after rendering
      continue;
    }
    for (std::int64_t g = 0; g < v.grid.t; ++g) video_grids.push_back({1, v.grid.h, v.grid.w});
  }
  if (options.merge_size < 1) {
    return Error(ErrorCode::kInvalidArgument, "merge_size " + std::to_string(options.merge_size) + " is not positive");
  }
  const std::int64_t merge2 = static_cast<std::int64_t>(options.merge_size) * options.merge_size;
  for (std::span<const Grid3> grids : {image_grids, std::span<const Grid3>(video_grids)}) {
    for (const Grid3& g : grids) {  // a patch grid the merger can cut into merge x merge blocks
      if (g.t < 1 || g.h < 1 || g.w < 1 || g.h % options.merge_size != 0 || g.w % options.merge_size != 0) {
        return Error(ErrorCode::kInvalidArgument, "grid " + grid_text(g) +
                                                      " is not positive with h and w multiples of merge_size " +
                                                      std::to_string(options.merge_size));
      }
      if (g.t > kMaxGridSide || g.h > kMaxGridSide || g.w > kMaxGridSide ||
          g.t * g.h * g.w / merge2 > kMaxMediaTokens) {
        return Error(ErrorCode::kInvalidArgument,
                     "grid " + grid_text(g) + " makes more than " + std::to_string(kMaxMediaTokens) + " tokens");
      }
    }
  }
  MMFEED_ASSIGN_OR_RETURN(Rendered r, render_chat(c, tmpl, options.render));
  const MediaTokens& media = media_tokens(tmpl);
  const auto block_of = [](std::string_view start, std::string_view pad, std::string_view end) {
    return std::string(start) + std::string(pad) + std::string(end);
  };
  const std::string image_text = block_of(media.vision_start, media.image_pad, media.vision_end);
  const std::string video_text = block_of(media.vision_start, media.video_pad, media.vision_end);
  const std::string audio_text = block_of(media.audio_start, media.audio_pad, media.audio_end);
  std::vector<ByteSpan> media_text;  // the rendered media blocks, in order
  for (const auto& [block, n, what] : {std::tuple{std::string_view(image_text), n_images, "images"},
                                       std::tuple{std::string_view(video_text), n_videos, "videos"},
                                       std::tuple{std::string_view(audio_text), n_audios, "audio clips"}}) {
    std::size_t rendered = 0;
    for (std::size_t at = n > 0 ? r.text.find(block) : std::string::npos; at != std::string::npos;
         at = r.text.find(block, at + block.size())) {
      ++rendered;
      media_text.push_back({at, at + block.size()});
    }
    if (rendered != n) {  // Qwen3-VL Instruct prints no media in assistant turns or system messages
      return Error(ErrorCode::kInvalidArgument,
                   "the " + std::string(chat_template_name(tmpl)) + " template renders " + std::to_string(rendered) +
                       " of the conversation's " + std::to_string(n) + " " + what +
                       " (it prints none in some turns, e.g. Qwen3-VL Instruct's assistant and system turns); move "
                       "them to a user turn");
    }
  }
  std::sort(media_text.begin(), media_text.end(), [](ByteSpan x, ByteSpan y) { return x.begin < y.begin; });
  for (std::size_t k = 0; timestamped && k < videos.size(); ++k) {
    if (static_cast<std::int64_t>(videos[k].timestamps.size()) != videos[k].grid.t) {
      return Error(ErrorCode::kInvalidArgument,
                   "video " + std::to_string(k) + " has " + std::to_string(videos[k].grid.t) + " temporal groups but " +
                       std::to_string(videos[k].timestamps.size()) + " timestamps (the " +
                       std::string(chat_template_name(tmpl)) + " template writes one before each group)");
    }
  }
  const bool omni = takes_audio(tmpl);
  const int tokens_per_second =
      omni && options.tokens_per_second == 0 ? model_tokens_per_second(tmpl) : options.tokens_per_second;
  for (std::size_t k = 0; omni && options.mrope_position_ids && k < videos.size(); ++k) {
    if (!(videos[k].second_per_grid_t > 0)) {
      return Error(ErrorCode::kInvalidArgument,
                   "video " + std::to_string(k) + " has no second_per_grid_t (temporal_patch_size / fps), which the " +
                       std::string(chat_template_name(tmpl)) + " model's positions need");
    }
  }
  // Timestamps go in before tokenizing (they are tokenized with the text around them); an
  // offset in the new text maps back to the rendering's for the label spans.
  // Without videos there is nothing to write, nor a copy of the text to make.
  const std::vector<Insertion> insertions =
      timestamped && !videos.empty() ? write_timestamps(r.text, videos) : std::vector<Insertion>{};
  const auto id_of = [&](std::string_view token) { return token.empty() ? std::nullopt : tok.token_to_id(token); };
  const auto image_pad = id_of(media.image_pad), video_pad = id_of(media.video_pad);
  const auto vision_start = id_of(media.vision_start), vision_end = id_of(media.vision_end);
  const auto audio_pad = id_of(media.audio_pad);
  const auto audio_start = id_of(media.audio_start), audio_end = id_of(media.audio_end);
  if (!image_pad || !video_pad || !vision_start || !vision_end ||
      (omni && (!audio_pad || !audio_start || !audio_end))) {
    return Error(ErrorCode::kUnsupported, "tokenizer lacks the " + std::string(chat_template_name(tmpl)) +
                                              " template's media tokens (" + std::string(media.vision_start) + ", " +
                                              std::string(media.image_pad) +
                                              (omni ? ", " + std::string(media.audio_pad) : std::string()) + ", ...)");
  }
  // Ids no token has stand in for the audio tokens of a template without them.
  const std::int32_t audio_pad_id = audio_pad.value_or(-1), audio_start_id = audio_start.value_or(-1),
                     audio_end_id = audio_end.value_or(-1);
  RenderedOffsets rendered_offset(insertions);
  LossMask trained(r, options);

  // Under max_length the text is tokenized only as far as the outcome needs (issue 31: a line of
  // 32 MB was tokenized whole, ~1.2 GB, before being refused): refused, it is counted to twice
  // max_length, so that a sample near the limit is told its count; truncated, to the first token
  // past max_length outside a media block, where every block the cut can meet has been seen.
  std::size_t stop_after = SIZE_MAX;
  if (options.max_length > 0) {
    // std::max: twice a max_length past SIZE_MAX / 2 wraps, and max_length itself is kept then.
    stop_after = options.truncation == Truncation::kTruncate ? options.max_length
                                                             : std::max(options.max_length, 2 * options.max_length);
  }
  bool stopped = false;
  std::size_t next_media_text = 0;  // the first rendered media block not wholly before the last token
  auto in_media_block = [&](std::size_t at) {
    while (next_media_text < media_text.size() && media_text[next_media_text].end <= at) ++next_media_text;
    return next_media_text < media_text.size() && media_text[next_media_text].begin <= at;
  };

  SftSample s;
  enum class Kind { kImage, kVideo, kAudio };
  std::size_t next_image = 0, next_video = 0, next_audio = 0;
  struct Block {
    std::size_t start, end;  // [start token index, one past the pads); a timestamped video: all its groups
    Kind kind;
  };
  std::vector<Block> blocks;
  std::size_t block_start = 0, previous_start = 0;  // the last start token, and the one before it
  std::size_t group_video = 0, group = 0,
              video_start = 0;  // the video the next video pad belongs to, its group, its start
  bool too_many_pads = false;
  MMFEED_RETURN_IF_ERROR(tok.encode_each(r.text, [&](const Token& token) {
    const std::int32_t id = token.id;
    const std::size_t at = rendered_offset(token.begin);
    if (s.input_ids.size() > stop_after && !in_media_block(at)) {
      stopped = true;
      return false;
    }
    if (id == *image_pad || id == *video_pad || id == audio_pad_id) {
      const Kind kind = id == *image_pad ? Kind::kImage : id == *video_pad ? Kind::kVideo : Kind::kAudio;
      std::int64_t n = 0;
      if (kind == Kind::kAudio) {
        if (next_audio >= audio_tokens.size())
          too_many_pads = true;
        else
          n = audio_tokens[next_audio++];
      } else {
        const bool image = kind == Kind::kImage;
        if (image ? next_image >= image_grids.size() : next_video >= video_grids.size()) {
          too_many_pads = true;
        } else {
          const Grid3 g = image ? image_grids[next_image++] : video_grids[next_video++];
          n = g.t * g.h * g.w / merge2;
        }
      }
      if (too_many_pads) return false;
      if (kind == Kind::kVideo && !timestamped && videos[next_video - 1].audio_tokens > 0) {
        const auto append = [&](std::int32_t what, std::size_t count) {
          s.input_ids.insert(s.input_ids.end(), count, what);
          s.labels.insert(s.labels.end(), count, kIgnoreIndex);
        };
        append(audio_start_id, 1);
        for (const Piece& piece : text_order(soundtrack_of(videos[next_video - 1], merge2, tmpl), tmpl)) {
          append(piece.video ? id : audio_pad_id, piece.count);
        }
        append(audio_end_id, 1);
        blocks.push_back({block_start, s.input_ids.size(), kind});
        return true;
      }
      s.input_ids.insert(s.input_ids.end(), static_cast<std::size_t>(n), id);
      s.labels.insert(s.labels.end(), static_cast<std::size_t>(n), kIgnoreIndex);
      if (kind != Kind::kVideo || !timestamped) {
        blocks.push_back({block_start, s.input_ids.size(), kind});
        return true;
      }
      // A timestamped video is one block from the <|vision_start|> before its first group's to
      // its last group's <|vision_end|> (the check below adds the outer <|vision_end|>).
      if (group == 0) video_start = previous_start;
      if (++group == static_cast<std::size_t>(videos[group_video].grid.t)) {
        blocks.push_back({video_start, s.input_ids.size() + 1, Kind::kVideo});
        ++group_video;
        group = 0;
      }
      return true;
    }
    if (id == *vision_start || id == audio_start_id) {
      previous_start = block_start;
      block_start = s.input_ids.size();
    }
    s.input_ids.push_back(id);
    const bool bound = id == *vision_start || id == *vision_end || id == audio_start_id || id == audio_end_id;
    s.labels.push_back(!bound && trained(at) ? id : kIgnoreIndex);
    return true;
  }));
  if (too_many_pads) return Error(ErrorCode::kInvalidArgument, "text holds more media pads than grids or clips given");
  if (!stopped && next_image != image_grids.size()) {
    return Error(ErrorCode::kInvalidArgument, "text of the conversation holds " + std::to_string(next_image) +
                                                  " image pads for " + std::to_string(image_grids.size()) + " grids");
  }
  s.images_kept = image_grids.size();
  s.videos_kept = videos.size();
  s.audios_kept = audio_tokens.size();

  if (options.max_length > 0 && s.input_ids.size() > options.max_length) {
    if (options.truncation == Truncation::kError) {
      return Error(ErrorCode::kResourceExhausted,
                   "conversation has " + std::string(stopped ? "more than " : "") + std::to_string(s.input_ids.size()) +
                       " tokens, more than max_length " + std::to_string(options.max_length) +
                       (stopped ? " (counted no further)" : ""));
    }
    std::size_t cut = options.max_length;
    s.images_kept = s.videos_kept = s.audios_kept = 0;
    for (const Block& b : blocks) {  // never cut inside a block (+1: its end token)
      if (b.end + 1 <= cut) {
        (b.kind == Kind::kImage ? s.images_kept : b.kind == Kind::kVideo ? s.videos_kept : s.audios_kept) += 1;
      } else {
        cut = std::min(cut, b.start);
        break;
      }
    }
    s.input_ids.resize(cut);
    s.labels.resize(cut);
    s.truncated = true;
  }
  s.attention_mask.assign(s.input_ids.size(), 1);

  if (options.mrope_position_ids) {
    // Text runs (and audio: its tokens count like text) count on all three axes; a vision block
    // starts at the next position and walks (t, h/merge, w/merge); the text after it continues
    // from the block's maximum + 1.
    const std::size_t L = s.input_ids.size();
    s.position_ids.assign(3 * L, 0);
    std::int64_t next_pos = 0;
    std::size_t i = 0, image = 0, video = 0;
    while (i < L) {
      const std::int32_t id = s.input_ids[i];
      if (id == audio_start_id && i + 1 < L && s.input_ids[i + 1] == *video_pad) {
        i = soundtrack_positions(videos[video], tmpl, options.merge_size, next_pos, i, s.position_ids, L);
        ++video;
        continue;
      }
      if (id != *image_pad && id != *video_pad) {
        for (int axis = 0; axis < 3; ++axis) s.position_ids[axis * L + i] = static_cast<std::int32_t>(next_pos);
        ++next_pos;
        ++i;
        continue;
      }
      const bool image_block = id == *image_pad;
      const std::size_t k = image_block ? image : video;
      const Grid3 g = image_block ? image_grids[image++] : video_grids[video++];
      // The temporal position of group t, as each model computes it in float32. Qwen2.5-VL:
      // t x (second_per_grid_t x tokens_per_second), truncated; Qwen2-VL and images: t. Omni
      // models: (t x second_per_grid_t) x position_id_per_seconds (images: t x it), truncated by
      // Qwen2.5-Omni, kept as a float by Qwen3-Omni (refused here unless whole).
      auto temporal = [&](std::int64_t t) -> Result<std::int64_t> {
        const float tf = static_cast<float>(t), per_second = static_cast<float>(tokens_per_second);
        if (omni) {
          const float at =
              image_block ? tf * per_second : tf * static_cast<float>(videos[k].second_per_grid_t) * per_second;
          if (tmpl == ChatTemplate::kQwen3OmniThinking && at != std::trunc(at)) {
            return fractional_position(k, t, at, videos[k].second_per_grid_t);
          }
          return static_cast<std::int64_t>(at);
        }
        if (!image_block && !timestamped && tokens_per_second > 0) {
          const float step = per_second * static_cast<float>(videos[k].second_per_grid_t);
          return static_cast<std::int64_t>(tf * step);
        }
        return t;
      };
      const std::int64_t gh = g.h / options.merge_size, gw = g.w / options.merge_size;
      std::int64_t max_pos = next_pos;
      for (std::int64_t t = 0; t < g.t; ++t) {
        MMFEED_ASSIGN_OR_RETURN(const std::int64_t tp, temporal(t));
        for (std::int64_t h = 0; h < gh; ++h) {
          for (std::int64_t w = 0; w < gw; ++w, ++i) {
            s.position_ids[0 * L + i] = static_cast<std::int32_t>(next_pos + tp);
            s.position_ids[1 * L + i] = static_cast<std::int32_t>(next_pos + h);
            s.position_ids[2 * L + i] = static_cast<std::int32_t>(next_pos + w);
            max_pos = std::max({max_pos, next_pos + tp, next_pos + h, next_pos + w});
          }
        }
      }
      next_pos = max_pos + 1;
    }
  }
  return s;
}

}  // namespace mmfeed::text
