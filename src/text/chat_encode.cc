// One stage in one file of about 740 lines, on purpose: a video's soundtrack (the Omni models'
// use_audio_in_video) is written by the same token pass that expands the pads and numbered by the
// same position pass, and its order is decided once for both here.
//
// A rendered conversation encoded for supervised fine-tuning: tokenized in one piece, each vision
// pad expanded to its grid's tokens, labels by policy from the rendered spans (the loss mask),
// truncation that never cuts a vision block, and optional mrope position ids. Rendering is in
// chat.cc, parsing in conversation.cc.
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

// One encode_conversation call: the conversation and what was given for its media, and the
// sample its steps build. encode() runs the steps in order.
class Encoder {
 public:
  Encoder(const Tokenizer& tok, const Conversation& c, ChatTemplate tmpl, std::span<const Grid3> image_grids,
          std::span<const VideoGrid> videos, std::span<const std::int64_t> audio_tokens, const SftOptions& options)
      : tok_(tok),
        c_(c),
        tmpl_(tmpl),
        image_grids_(image_grids),
        videos_(videos),
        audio_tokens_(audio_tokens),
        options_(options),
        n_images_(c.count(ContentItem::Type::kImage)),
        n_videos_(c.count(ContentItem::Type::kVideo)),
        n_audios_(c.count(ContentItem::Type::kAudio)),
        timestamped_(timestamps_videos(tmpl)),
        omni_(takes_audio(tmpl)),
        tokens_per_second_(omni_ && options.tokens_per_second == 0 ? model_tokens_per_second(tmpl)
                                                                   : options.tokens_per_second),
        media_(media_tokens(tmpl)) {}

  Result<SftSample> encode() {
    MMFEED_RETURN_IF_ERROR(check_counts());
    MMFEED_RETURN_IF_ERROR(check_soundtracks());
    MMFEED_RETURN_IF_ERROR(plan_grids());
    MMFEED_ASSIGN_OR_RETURN(Rendered r, render_chat(c_, tmpl_, options_.render));
    MMFEED_RETURN_IF_ERROR(find_media_blocks(r.text));
    MMFEED_RETURN_IF_ERROR(check_video_times());
    MMFEED_RETURN_IF_ERROR(resolve_media_ids());
    MMFEED_RETURN_IF_ERROR(tokenize(r));
    MMFEED_RETURN_IF_ERROR(fit_max_length());
    s_.attention_mask.assign(s_.input_ids.size(), 1);
    if (options_.mrope_position_ids) MMFEED_RETURN_IF_ERROR(mrope_positions());
    return std::move(s_);
  }

 private:
  enum class Kind { kImage, kVideo, kAudio };
  struct Block {
    std::size_t start, end;  // [start token index, one past the pads); a timestamped video: all its groups
    Kind kind;
  };

  // As many grids and clips as the conversation has media, each clip's tokens in range.
  Status check_counts() const {
    if (n_audios_ > 0 && !takes_audio(tmpl_)) {
      return Error(ErrorCode::kUnsupported, "the conversation holds audio, which only an Omni template encodes");
    }
    if (n_images_ != image_grids_.size()) {
      return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_images_) + " images but " +
                                                    std::to_string(image_grids_.size()) + " image grids were given");
    }
    if (n_videos_ != videos_.size()) {
      return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_videos_) + " videos but " +
                                                    std::to_string(videos_.size()) + " video grids were given");
    }
    if (n_audios_ != audio_tokens_.size()) {
      return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_audios_) + " audio clips but " +
                                                    std::to_string(audio_tokens_.size()) +
                                                    " audio token counts were given");
    }
    for (std::size_t k = 0; k < audio_tokens_.size(); ++k) {
      if (audio_tokens_[k] < 1 || audio_tokens_[k] > kMaxMediaTokens) {
        return Error(ErrorCode::kInvalidArgument, "audio clip " + std::to_string(k) + " has " +
                                                      std::to_string(audio_tokens_[k]) + " audio tokens, not in [1, " +
                                                      std::to_string(kMaxMediaTokens) + "]");
      }
    }
    return ok_status();
  }

  // A video's soundtrack (use_audio_in_video): an Omni template's, in range, with the seconds
  // its interleaving needs.
  Status check_soundtracks() const {
    for (std::size_t k = 0; k < videos_.size(); ++k) {
      const VideoGrid& v = videos_[k];
      if (v.audio_tokens == 0) continue;
      if (!takes_audio(tmpl_)) {
        return Error(ErrorCode::kInvalidArgument, "video " + std::to_string(k) +
                                                      " brings its soundtrack (use_audio_in_video), which only an "
                                                      "Omni template encodes, not " +
                                                      std::string(chat_template_name(tmpl_)));
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
      if (tmpl_ == ChatTemplate::kQwen3OmniThinking && options_.mrope_position_ids) {  // the merge compares them too
        for (std::int64_t t = 0; t < std::min(v.grid.t, kMaxGridSide); ++t) {          // a larger grid is refused below
          const float at = static_cast<float>(t) * static_cast<float>(v.second_per_grid_t) *
                           static_cast<float>(model_tokens_per_second(tmpl_));
          if (at != std::trunc(at)) return fractional_position(k, t, at, v.second_per_grid_t);
        }
      }
    }
    return ok_status();
  }

  // One grid per video pad in the text (per group when timestamped), each one the merger can cut
  // and within the bounds.
  Status plan_grids() {
    for (std::size_t k = 0; k < videos_.size(); ++k) {
      const VideoGrid& v = videos_[k];
      if (!timestamped_ || static_cast<std::int64_t>(v.timestamps.size()) != v.grid.t) {
        video_grids_.push_back(v.grid);  // a mismatch is reported after rendering
        continue;
      }
      for (std::int64_t g = 0; g < v.grid.t; ++g) video_grids_.push_back({1, v.grid.h, v.grid.w});
    }
    if (options_.merge_size < 1) {
      return Error(ErrorCode::kInvalidArgument,
                   "merge_size " + std::to_string(options_.merge_size) + " is not positive");
    }
    merge2_ = static_cast<std::int64_t>(options_.merge_size) * options_.merge_size;
    for (std::span<const Grid3> grids : {image_grids_, std::span<const Grid3>(video_grids_)}) {
      for (const Grid3& g : grids) {  // a patch grid the merger can cut into merge x merge blocks
        if (g.t < 1 || g.h < 1 || g.w < 1 || g.h % options_.merge_size != 0 || g.w % options_.merge_size != 0) {
          return Error(ErrorCode::kInvalidArgument, "grid " + grid_text(g) +
                                                        " is not positive with h and w multiples of merge_size " +
                                                        std::to_string(options_.merge_size));
        }
        if (g.t > kMaxGridSide || g.h > kMaxGridSide || g.w > kMaxGridSide ||
            g.t * g.h * g.w / merge2_ > kMaxMediaTokens) {
          return Error(ErrorCode::kInvalidArgument,
                       "grid " + grid_text(g) + " makes more than " + std::to_string(kMaxMediaTokens) + " tokens");
        }
      }
    }
    return ok_status();
  }

  // The rendered media blocks, in order: as many of each kind as the conversation has.
  Status find_media_blocks(const std::string& text) {
    const auto block_of = [](std::string_view start, std::string_view pad, std::string_view end) {
      return std::string(start) + std::string(pad) + std::string(end);
    };
    const std::string image_text = block_of(media_.vision_start, media_.image_pad, media_.vision_end);
    const std::string video_text = block_of(media_.vision_start, media_.video_pad, media_.vision_end);
    const std::string audio_text = block_of(media_.audio_start, media_.audio_pad, media_.audio_end);
    for (const auto& [block, n, what] : {std::tuple{std::string_view(image_text), n_images_, "images"},
                                         std::tuple{std::string_view(video_text), n_videos_, "videos"},
                                         std::tuple{std::string_view(audio_text), n_audios_, "audio clips"}}) {
      std::size_t rendered = 0;
      for (std::size_t at = n > 0 ? text.find(block) : std::string::npos; at != std::string::npos;
           at = text.find(block, at + block.size())) {
        ++rendered;
        media_text_.push_back({at, at + block.size()});
      }
      if (rendered != n) {  // Qwen3-VL Instruct prints no media in assistant turns or system messages
        return Error(ErrorCode::kInvalidArgument,
                     "the " + std::string(chat_template_name(tmpl_)) + " template renders " + std::to_string(rendered) +
                         " of the conversation's " + std::to_string(n) + " " + what +
                         " (it prints none in some turns, e.g. Qwen3-VL Instruct's assistant and system turns); move "
                         "them to a user turn");
      }
    }
    std::sort(media_text_.begin(), media_text_.end(), [](ByteSpan x, ByteSpan y) { return x.begin < y.begin; });
    return ok_status();
  }

  // A timestamped template's videos have a timestamp per group; an Omni model's positions need
  // each video's seconds per group.
  Status check_video_times() const {
    for (std::size_t k = 0; timestamped_ && k < videos_.size(); ++k) {
      if (static_cast<std::int64_t>(videos_[k].timestamps.size()) != videos_[k].grid.t) {
        return Error(ErrorCode::kInvalidArgument,
                     "video " + std::to_string(k) + " has " + std::to_string(videos_[k].grid.t) +
                         " temporal groups but " + std::to_string(videos_[k].timestamps.size()) + " timestamps (the " +
                         std::string(chat_template_name(tmpl_)) + " template writes one before each group)");
      }
    }
    for (std::size_t k = 0; omni_ && options_.mrope_position_ids && k < videos_.size(); ++k) {
      if (!(videos_[k].second_per_grid_t > 0)) {
        return Error(ErrorCode::kInvalidArgument,
                     "video " + std::to_string(k) +
                         " has no second_per_grid_t (temporal_patch_size / fps), which the " +
                         std::string(chat_template_name(tmpl_)) + " model's positions need");
      }
    }
    return ok_status();
  }

  // The template's media tokens in this tokenizer.
  Status resolve_media_ids() {
    const auto id_of = [&](std::string_view token) { return token.empty() ? std::nullopt : tok_.token_to_id(token); };
    const auto image_pad = id_of(media_.image_pad), video_pad = id_of(media_.video_pad);
    const auto vision_start = id_of(media_.vision_start), vision_end = id_of(media_.vision_end);
    const auto audio_pad = id_of(media_.audio_pad);
    const auto audio_start = id_of(media_.audio_start), audio_end = id_of(media_.audio_end);
    if (!image_pad || !video_pad || !vision_start || !vision_end ||
        (omni_ && (!audio_pad || !audio_start || !audio_end))) {
      return Error(ErrorCode::kUnsupported,
                   "tokenizer lacks the " + std::string(chat_template_name(tmpl_)) + " template's media tokens (" +
                       std::string(media_.vision_start) + ", " + std::string(media_.image_pad) +
                       (omni_ ? ", " + std::string(media_.audio_pad) : std::string()) + ", ...)");
    }
    image_pad_ = *image_pad;
    video_pad_ = *video_pad;
    vision_start_ = *vision_start;
    vision_end_ = *vision_end;
    audio_pad_ = audio_pad.value_or(-1);
    audio_start_ = audio_start.value_or(-1);
    audio_end_ = audio_end.value_or(-1);
    return ok_status();
  }

  // Tokenizes the rendering (its timestamps written in first), each pad expanded to its media's
  // tokens, labels from the loss mask.
  Status tokenize(Rendered& r) {
    // Timestamps go in before tokenizing (they are tokenized with the text around them); an
    // offset in the new text maps back to the rendering's for the label spans.
    // Without videos there is nothing to write, nor a copy of the text to make.
    const std::vector<Insertion> insertions =
        timestamped_ && !videos_.empty() ? write_timestamps(r.text, videos_) : std::vector<Insertion>{};
    RenderedOffsets rendered_offset(insertions);
    LossMask trained(r, options_);

    // Under max_length the text is tokenized only as far as the outcome needs (issue 31: a line of
    // 32 MB was tokenized whole, ~1.2 GB, before being refused): refused, it is counted to twice
    // max_length, so that a sample near the limit is told its count; truncated, to the first token
    // past max_length outside a media block, where every block the cut can meet has been seen.
    std::size_t stop_after = SIZE_MAX;
    if (options_.max_length > 0) {
      // std::max: twice a max_length past SIZE_MAX / 2 wraps, and max_length itself is kept then.
      stop_after = options_.truncation == Truncation::kTruncate
                       ? options_.max_length
                       : std::max(options_.max_length, 2 * options_.max_length);
    }
    std::size_t next_media_text = 0;  // the first rendered media block not wholly before the last token
    auto in_media_block = [&](std::size_t at) {
      while (next_media_text < media_text_.size() && media_text_[next_media_text].end <= at) ++next_media_text;
      return next_media_text < media_text_.size() && media_text_[next_media_text].begin <= at;
    };
    bool too_many_pads = false;
    MMFEED_RETURN_IF_ERROR(tok_.encode_each(r.text, [&](const Token& token) {
      const std::int32_t id = token.id;
      const std::size_t at = rendered_offset(token.begin);
      if (s_.input_ids.size() > stop_after && !in_media_block(at)) {
        stopped_ = true;
        return false;
      }
      if (id == image_pad_ || id == video_pad_ || id == audio_pad_) {
        too_many_pads = !expand_pad(id);
        return !too_many_pads;
      }
      if (id == vision_start_ || id == audio_start_) {
        previous_start_ = block_start_;
        block_start_ = s_.input_ids.size();
      }
      s_.input_ids.push_back(id);
      const bool bound = id == vision_start_ || id == vision_end_ || id == audio_start_ || id == audio_end_;
      s_.labels.push_back(!bound && trained(at) ? id : kIgnoreIndex);
      return true;
    }));
    if (too_many_pads) {
      return Error(ErrorCode::kInvalidArgument, "text holds more media pads than grids or clips given");
    }
    if (!stopped_ && next_image_ != image_grids_.size()) {
      return Error(ErrorCode::kInvalidArgument, "text of the conversation holds " + std::to_string(next_image_) +
                                                    " image pads for " + std::to_string(image_grids_.size()) +
                                                    " grids");
    }
    s_.images_kept = image_grids_.size();
    s_.videos_kept = videos_.size();
    s_.audios_kept = audio_tokens_.size();
    return ok_status();
  }

  // Pad `id`: its media's tokens (a video's soundtrack interleaved), and the block it ends. False
  // when the text holds more pads than media were given.
  bool expand_pad(std::int32_t id) {
    const Kind kind = id == image_pad_ ? Kind::kImage : id == video_pad_ ? Kind::kVideo : Kind::kAudio;
    std::int64_t n = 0;
    if (kind == Kind::kAudio) {
      if (next_audio_ >= audio_tokens_.size()) return false;
      n = audio_tokens_[next_audio_++];
    } else {
      const bool image = kind == Kind::kImage;
      if (image ? next_image_ >= image_grids_.size() : next_video_ >= video_grids_.size()) return false;
      const Grid3 g = image ? image_grids_[next_image_++] : video_grids_[next_video_++];
      n = g.t * g.h * g.w / merge2_;
    }
    if (kind == Kind::kVideo && !timestamped_ && videos_[next_video_ - 1].audio_tokens > 0) {
      const auto append = [&](std::int32_t what, std::size_t count) {
        s_.input_ids.insert(s_.input_ids.end(), count, what);
        s_.labels.insert(s_.labels.end(), count, kIgnoreIndex);
      };
      append(audio_start_, 1);
      for (const Piece& piece : text_order(soundtrack_of(videos_[next_video_ - 1], merge2_, tmpl_), tmpl_)) {
        append(piece.video ? id : audio_pad_, piece.count);
      }
      append(audio_end_, 1);
      blocks_.push_back({block_start_, s_.input_ids.size(), kind});
      return true;
    }
    s_.input_ids.insert(s_.input_ids.end(), static_cast<std::size_t>(n), id);
    s_.labels.insert(s_.labels.end(), static_cast<std::size_t>(n), kIgnoreIndex);
    if (kind != Kind::kVideo || !timestamped_) {
      blocks_.push_back({block_start_, s_.input_ids.size(), kind});
      return true;
    }
    // A timestamped video is one block from the <|vision_start|> before its first group's to
    // its last group's <|vision_end|> (the check below adds the outer <|vision_end|>).
    if (group_ == 0) video_start_ = previous_start_;
    if (++group_ == static_cast<std::size_t>(videos_[group_video_].grid.t)) {
      blocks_.push_back({video_start_, s_.input_ids.size() + 1, Kind::kVideo});
      ++group_video_;
      group_ = 0;
    }
    return true;
  }

  // Over max_length: an error, or cut before the first block the cut would split.
  Status fit_max_length() {
    if (options_.max_length > 0 && s_.input_ids.size() > options_.max_length) {
      if (options_.truncation == Truncation::kError) {
        return Error(ErrorCode::kResourceExhausted,
                     "conversation has " + std::string(stopped_ ? "more than " : "") +
                         std::to_string(s_.input_ids.size()) + " tokens, more than max_length " +
                         std::to_string(options_.max_length) + (stopped_ ? " (counted no further)" : ""));
      }
      std::size_t cut = options_.max_length;
      s_.images_kept = s_.videos_kept = s_.audios_kept = 0;
      for (const Block& b : blocks_) {  // never cut inside a block (+1: its end token)
        if (b.end + 1 <= cut) {
          (b.kind == Kind::kImage ? s_.images_kept : b.kind == Kind::kVideo ? s_.videos_kept : s_.audios_kept) += 1;
        } else {
          cut = std::min(cut, b.start);
          break;
        }
      }
      s_.input_ids.resize(cut);
      s_.labels.resize(cut);
      s_.truncated = true;
    }
    return ok_status();
  }

  // The temporal position of group t of image or video k, as each model computes it in float32.
  // Qwen2.5-VL: t x (second_per_grid_t x tokens_per_second), truncated; Qwen2-VL and images: t.
  // Omni models: (t x second_per_grid_t) x position_id_per_seconds (images: t x it), truncated by
  // Qwen2.5-Omni, kept as a float by Qwen3-Omni (refused here unless whole).
  Result<std::int64_t> temporal(bool image_block, std::size_t k, std::int64_t t) const {
    const float tf = static_cast<float>(t), per_second = static_cast<float>(tokens_per_second_);
    if (omni_) {
      const float at =
          image_block ? tf * per_second : tf * static_cast<float>(videos_[k].second_per_grid_t) * per_second;
      if (tmpl_ == ChatTemplate::kQwen3OmniThinking && at != std::trunc(at)) {
        return fractional_position(k, t, at, videos_[k].second_per_grid_t);
      }
      return static_cast<std::int64_t>(at);
    }
    if (!image_block && !timestamped_ && tokens_per_second_ > 0) {
      const float step = per_second * static_cast<float>(videos_[k].second_per_grid_t);
      return static_cast<std::int64_t>(tf * step);
    }
    return t;
  }

  // Text runs (and audio: its tokens count like text) count on all three axes; a vision block
  // starts at the next position and walks (t, h/merge, w/merge); the text after it continues
  // from the block's maximum + 1.
  Status mrope_positions() {
    const std::size_t L = s_.input_ids.size();
    s_.position_ids.assign(3 * L, 0);
    std::int64_t next_pos = 0;
    std::size_t i = 0, image = 0, video = 0;
    while (i < L) {
      const std::int32_t id = s_.input_ids[i];
      if (id == audio_start_ && i + 1 < L && s_.input_ids[i + 1] == video_pad_) {
        i = soundtrack_positions(videos_[video], tmpl_, options_.merge_size, next_pos, i, s_.position_ids, L);
        ++video;
        continue;
      }
      if (id != image_pad_ && id != video_pad_) {
        for (int axis = 0; axis < 3; ++axis) s_.position_ids[axis * L + i] = static_cast<std::int32_t>(next_pos);
        ++next_pos;
        ++i;
        continue;
      }
      const bool image_block = id == image_pad_;
      const std::size_t k = image_block ? image : video;
      const Grid3 g = image_block ? image_grids_[image++] : video_grids_[video++];
      const std::int64_t gh = g.h / options_.merge_size, gw = g.w / options_.merge_size;
      std::int64_t max_pos = next_pos;
      for (std::int64_t t = 0; t < g.t; ++t) {
        MMFEED_ASSIGN_OR_RETURN(const std::int64_t tp, temporal(image_block, k, t));
        for (std::int64_t h = 0; h < gh; ++h) {
          for (std::int64_t w = 0; w < gw; ++w, ++i) {
            s_.position_ids[0 * L + i] = static_cast<std::int32_t>(next_pos + tp);
            s_.position_ids[1 * L + i] = static_cast<std::int32_t>(next_pos + h);
            s_.position_ids[2 * L + i] = static_cast<std::int32_t>(next_pos + w);
            max_pos = std::max({max_pos, next_pos + tp, next_pos + h, next_pos + w});
          }
        }
      }
      next_pos = max_pos + 1;
    }
    return ok_status();
  }

  const Tokenizer& tok_;
  const Conversation& c_;
  const ChatTemplate tmpl_;
  const std::span<const Grid3> image_grids_;
  const std::span<const VideoGrid> videos_;
  const std::span<const std::int64_t> audio_tokens_;
  const SftOptions& options_;
  const std::size_t n_images_, n_videos_, n_audios_;
  const bool timestamped_;  // the template writes each video group's time before it
  const bool omni_;         // an Omni template: audio, and positions at the model's rate
  const int tokens_per_second_;
  const MediaTokens& media_;
  std::vector<Grid3> video_grids_;    // one per video pad in the text: per group when timestamped
  std::int64_t merge2_ = 4;           // a merged block's patches: merge_size squared
  std::vector<ByteSpan> media_text_;  // the rendered media blocks, in order
  // The media tokens' ids; ids no token has (-1) stand in for the audio tokens of a template
  // without them.
  std::int32_t image_pad_ = -1, video_pad_ = -1, vision_start_ = -1, vision_end_ = -1;
  std::int32_t audio_pad_ = -1, audio_start_ = -1, audio_end_ = -1;
  // The token pass: the media expanded so far and the blocks they make.
  std::size_t next_image_ = 0, next_video_ = 0, next_audio_ = 0;
  std::vector<Block> blocks_;
  std::size_t block_start_ = 0, previous_start_ = 0;  // the last start token, and the one before it
  // A timestamped video: the video the next video pad belongs to, its group, its start.
  std::size_t group_video_ = 0, group_ = 0, video_start_ = 0;
  bool stopped_ = false;  // the pass stopped short (max_length)
  SftSample s_;
};

}  // namespace

Result<SftSample> encode_conversation(const Tokenizer& tok, const Conversation& c, ChatTemplate tmpl,
                                      std::span<const Grid3> image_grids, std::span<const VideoGrid> videos,
                                      std::span<const std::int64_t> audio_tokens, const SftOptions& options) {
  return Encoder(tok, c, tmpl, image_grids, videos, audio_tokens, options).encode();
}

}  // namespace mmfeed::text
