// A rendered conversation encoded for supervised fine-tuning: tokenized in one piece, each vision
// pad expanded to its grid's tokens, labels by policy from the rendered spans (the loss mask),
// truncation that never cuts a vision block, and optional mrope position ids. Rendering is in
// chat.cc, parsing in conversation.cc.
#include "text/chat.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>

namespace mmfeed::text {

Result<SftSample> encode_conversation(const Tokenizer& tok, const Conversation& c, ChatTemplate tmpl,
                                      std::span<const Grid3> image_grids, std::span<const Grid3> video_grids,
                                      const SftOptions& options) {
  const std::size_t n_images = c.count(ContentItem::Type::kImage);
  const std::size_t n_videos = c.count(ContentItem::Type::kVideo);
  if (n_images != image_grids.size()) {
    return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_images) + " images but " +
                                                  std::to_string(image_grids.size()) + " image grids were given");
  }
  if (n_videos != video_grids.size()) {
    return Error(ErrorCode::kInvalidArgument, "conversation has " + std::to_string(n_videos) + " videos but " +
                                                  std::to_string(video_grids.size()) + " video grids were given");
  }
  if (options.merge_size < 1) {
    return Error(ErrorCode::kInvalidArgument, "merge_size " + std::to_string(options.merge_size) + " is not positive");
  }
  for (std::span<const Grid3> grids : {image_grids, video_grids}) {
    for (const Grid3& g : grids) {  // a patch grid the merger can cut into merge x merge blocks
      if (g.t < 1 || g.h < 1 || g.w < 1 || g.h % options.merge_size != 0 || g.w % options.merge_size != 0) {
        return Error(ErrorCode::kInvalidArgument,
                     "grid (" + std::to_string(g.t) + ", " + std::to_string(g.h) + ", " + std::to_string(g.w) +
                         ") is not positive with h and w multiples of merge_size " + std::to_string(options.merge_size));
      }
    }
  }
  MMFEED_ASSIGN_OR_RETURN(Rendered r, render_chat(c, tmpl, options.render));
  for (const auto& [block, n, what] : {std::tuple{kImageBlock, n_images, "images"}, std::tuple{kVideoBlock, n_videos, "videos"}}) {
    std::size_t rendered = 0;
    for (std::size_t at = r.text.find(block); at != std::string::npos; at = r.text.find(block, at + block.size())) {
      ++rendered;
    }
    if (rendered != n) {  // Qwen3-VL Instruct prints no media in assistant turns or system messages
      return Error(ErrorCode::kInvalidArgument,
                   "the " + std::string(chat_template_name(tmpl)) + " template renders " + std::to_string(rendered) +
                       " of the conversation's " + std::to_string(n) + " " + what +
                       " (it prints none in some turns, e.g. Qwen3-VL Instruct's assistant and system turns); move "
                       "them to a user turn");
    }
  }
  MMFEED_ASSIGN_OR_RETURN(Encoding enc, tok.encode_with_offsets(r.text));
  const auto image_pad = tok.token_to_id("<|image_pad|>");
  const auto video_pad = tok.token_to_id("<|video_pad|>");
  const auto vision_start = tok.token_to_id("<|vision_start|>");
  const auto vision_end = tok.token_to_id("<|vision_end|>");
  if (!image_pad || !video_pad || !vision_start || !vision_end) {
    return Error(ErrorCode::kUnsupported, "tokenizer lacks the Qwen-VL vision tokens");
  }
  auto trained = [&](std::size_t at) {
    for (std::size_t k = 0; k < r.assistant_content.size(); ++k) {
      if (!options.train_reasoning && at >= r.assistant_think[k].begin && at < r.assistant_think[k].end) return false;
      if (at >= r.assistant_content[k].begin && at < r.assistant_content[k].end) return true;
      const std::size_t end_len = options.labels == LabelPolicy::kQwen ? 11 : 10;  // "<|im_end|>" (+ "\n")
      if (at >= r.assistant_end[k].begin && at < r.assistant_end[k].begin + end_len) return true;
    }
    return false;
  };

  SftSample s;
  const std::int64_t merge2 = static_cast<std::int64_t>(options.merge_size) * options.merge_size;
  std::size_t next_image = 0, next_video = 0;
  struct Block {
    std::size_t start, end;  // [<|vision_start|> index, one past the pads)
    bool image;
  };
  std::vector<Block> blocks;
  std::size_t block_start = 0;
  for (std::size_t i = 0; i < enc.ids.size(); ++i) {
    const std::int32_t id = enc.ids[i];
    if (id == *image_pad || id == *video_pad) {
      const bool image = id == *image_pad;
      if (image ? next_image >= image_grids.size() : next_video >= video_grids.size()) {
        return Error(ErrorCode::kInvalidArgument, "text holds more vision pads than grids given");
      }
      const Grid3 g = image ? image_grids[next_image++] : video_grids[next_video++];
      const std::int64_t n = g.t * g.h * g.w / merge2;
      s.input_ids.insert(s.input_ids.end(), static_cast<std::size_t>(n), id);
      s.labels.insert(s.labels.end(), static_cast<std::size_t>(n), kIgnoreIndex);
      blocks.push_back({block_start, s.input_ids.size(), image});
      continue;
    }
    if (id == *vision_start) block_start = s.input_ids.size();
    s.input_ids.push_back(id);
    const bool vision = id == *vision_start || id == *vision_end;
    s.labels.push_back(!vision && trained(enc.offsets[i].first) ? id : kIgnoreIndex);
  }
  if (next_image != image_grids.size()) {
    return Error(ErrorCode::kInvalidArgument, "text of the conversation holds " + std::to_string(next_image) +
                                                  " image pads for " + std::to_string(image_grids.size()) + " grids");
  }
  s.images_kept = image_grids.size();
  s.videos_kept = video_grids.size();

  if (options.max_length > 0 && s.input_ids.size() > options.max_length) {
    if (options.truncation == Truncation::kError) {
      return Error(ErrorCode::kResourceExhausted, "conversation has " + std::to_string(s.input_ids.size()) +
                                                      " tokens, more than max_length " + std::to_string(options.max_length));
    }
    std::size_t cut = options.max_length;
    s.images_kept = s.videos_kept = 0;
    for (const Block& b : blocks) {  // never cut inside a block (+1: its <|vision_end|>)
      if (b.end + 1 <= cut) {
        (b.image ? s.images_kept : s.videos_kept) += 1;
      } else {
        cut = std::min(cut, b.start);
        break;
      }
    }
    s.input_ids.resize(cut);
    s.labels.resize(cut);
  }
  s.attention_mask.assign(s.input_ids.size(), 1);

  if (options.mrope_position_ids) {
    // Text runs count on all three axes; a vision block starts at the next position and walks
    // (t, h/merge, w/merge); the text after it continues from the block's maximum + 1.
    const std::size_t L = s.input_ids.size();
    s.position_ids.assign(3 * L, 0);
    std::int64_t next_pos = 0;
    std::size_t i = 0, image = 0, video = 0;
    while (i < L) {
      const std::int32_t id = s.input_ids[i];
      if (id != *image_pad && id != *video_pad) {
        for (int axis = 0; axis < 3; ++axis) s.position_ids[axis * L + i] = static_cast<std::int32_t>(next_pos);
        ++next_pos;
        ++i;
        continue;
      }
      const Grid3 g = id == *image_pad ? image_grids[image++] : video_grids[video++];
      const std::int64_t gh = g.h / options.merge_size, gw = g.w / options.merge_size;
      std::int64_t max_pos = next_pos;
      for (std::int64_t t = 0; t < g.t; ++t) {
        for (std::int64_t h = 0; h < gh; ++h) {
          for (std::int64_t w = 0; w < gw; ++w, ++i) {
            s.position_ids[0 * L + i] = static_cast<std::int32_t>(next_pos + t);
            s.position_ids[1 * L + i] = static_cast<std::int32_t>(next_pos + h);
            s.position_ids[2 * L + i] = static_cast<std::int32_t>(next_pos + w);
            max_pos = std::max({max_pos, next_pos + t, next_pos + h, next_pos + w});
          }
        }
      }
      next_pos = max_pos + 1;
    }
  }
  return s;
}

}  // namespace mmfeed::text
