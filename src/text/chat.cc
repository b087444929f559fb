// Chat templates rendered in C++ (Qwen2-VL, Qwen3-VL Instruct and Thinking, each tested
// byte-identical to transformers' apply_chat_template), and a conversation encoded for SFT:
// tokens, image pads expanded, labels by policy, mrope ids. Parsing is in conversation.cc.
#include "text/chat.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "text/python_json.h"

namespace mmfeed::text {

namespace {

constexpr std::array<std::pair<ChatTemplate, std::string_view>, 3> kTemplateNames = {{
    {ChatTemplate::kQwen2VL, "Qwen2-VL"},
    {ChatTemplate::kQwen3VL, "Qwen3-VL Instruct"},
    {ChatTemplate::kQwen3VLThinking, "Qwen3-VL Thinking"},
}};

// A template given as a file: its text (or a JSON object's "chat_template" string) must equal
// one mmfeed renders.
Result<ChatTemplate> chat_template_file(const std::string& path) {
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{1} << 20;  // the templates are ~5 KB
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return Error(ErrorCode::kUnsupported,
                 "chat template '" + path + "' is neither a known name (qwen2-vl, qwen2.5-vl, qwen3-vl, "
                 "qwen3-vl-thinking) nor an existing file");
  }
  if (!std::filesystem::is_regular_file(status)) {
    return Error(ErrorCode::kUnsupported, "chat template file is not a regular file", path);
  }
  if (const std::uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxBytes) {
    return Error(ErrorCode::kUnsupported, "chat template file of " + std::to_string(size) + " bytes, more than " +
                                              std::to_string(kMaxBytes) + "; not a template mmfeed renders", path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::kNotFound, "cannot open chat template file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view inner;
  if (!parser.parse(text).get(doc) && !doc["chat_template"].get_string().get(inner)) text = std::string(inner);
  for (const auto& [tmpl, name] : kTemplateNames) {
    if (text == chat_template_text(tmpl)) return tmpl;
  }
  return Error(ErrorCode::kUnsupported,
               "chat template file '" + path + "' is not byte-identical to a template mmfeed renders (Qwen2-VL, "
               "Qwen3-VL Instruct, Qwen3-VL Thinking as published); mmfeed renders only templates it reproduces "
               "exactly: name one (qwen2-vl, qwen3-vl, qwen3-vl-thinking) or render with transformers");
}

constexpr std::string_view kImageBlock = "<|vision_start|><|image_pad|><|vision_end|>";
constexpr std::string_view kVideoBlock = "<|vision_start|><|video_pad|><|vision_end|>";
constexpr std::string_view kImEnd = "<|im_end|>\n";
constexpr std::string_view kToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// The vision counters of the templates' namespaces (image_count, video_count).
struct VisionCount {
  int images = 0;
  int videos = 0;
};

// A message's content as the templates render it: text, and media as vision blocks numbered
// with add_vision_id. `count`: increment the counters first (Qwen3-VL Thinking's
// render_content(..., false) prints the current values without counting).
std::string render_content(const Message& m, VisionCount& n, bool count, const RenderOptions& options) {
  std::string out;
  for (const ContentItem& item : m.content) {
    switch (item.type) {
      case ContentItem::Type::kText:
        out += item.value;
        break;
      case ContentItem::Type::kImage:
        if (count) ++n.images;
        if (options.add_vision_id) out += "Picture " + std::to_string(n.images) + ": ";
        out += kImageBlock;
        break;
      case ContentItem::Type::kVideo:
        if (count) ++n.videos;
        if (options.add_vision_id) out += "Video " + std::to_string(n.videos) + ": ";
        out += kVideoBlock;
        break;
    }
  }
  return out;
}

// Only the "text" of each item (media skipped unless they carry one): Qwen3-VL Instruct's system
// prompt and assistant content.
std::string render_text_only(const Message& m) {
  std::string out;
  for (const ContentItem& item : m.content) {
    if (item.type == ContentItem::Type::kText) {
      out += item.value;
    } else if (item.media_text) {
      out += *item.media_text;
    }
  }
  return out;
}

void render_tools_header(std::string& out, const Conversation& c, const std::string& system) {
  out += "<|im_start|>system\n";
  if (c.messages.front().role == "system") out += system + "\n\n";
  out += kToolsHead;
  for (const std::string& tool : c.tools) {
    out += '\n';
    out += tool;
  }
  out += kToolsTail;
}

void render_tool_calls(std::string& out, const Message& m, bool has_content) {
  for (std::size_t k = 0; k < m.tool_calls.size(); ++k) {
    if (k > 0 || has_content) out += '\n';
    out += "<tool_call>\n{\"name\": \"";
    out += m.tool_calls[k].name;
    out += "\", \"arguments\": ";
    out += m.tool_calls[k].arguments;
    out += "}\n</tool_call>";
  }
}

// A run of tool messages becomes one user turn of <tool_response> blocks.
void render_tool_response(std::string& out, const Conversation& c, std::size_t i, const std::string& content) {
  if (i == 0 || c.messages[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n";
  out += content;
  out += "\n</tool_response>";
  if (i + 1 == c.messages.size() || c.messages[i + 1].role != "tool") out += kImEnd;
}

std::string_view strip_newlines_left(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

std::string_view strip_newlines_right(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// Closes assistant turn `begin` (after its header): records its spans and ends it.
void end_assistant_turn(Rendered& r, std::size_t begin, ByteSpan think) {
  r.assistant_content.push_back({begin, r.text.size()});
  r.assistant_end.push_back({r.text.size(), r.text.size() + kImEnd.size()});
  r.assistant_think.push_back(think);
  r.text += kImEnd;
}

// tests/data/chat-templates/qwen2_vl.jinja
Rendered render_qwen2_vl(const Conversation& c, const RenderOptions& options) {
  Rendered r;
  VisionCount n;
  for (std::size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    if (i == 0 && m.role != "system") r.text += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
    r.text += "<|im_start|>" + m.role + "\n";
    const std::size_t begin = r.text.size();
    r.text += render_content(m, n, true, options);
    if (m.role == "assistant") {
      end_assistant_turn(r, begin, {begin, begin});
    } else {
      r.text += kImEnd;
    }
  }
  if (options.add_generation_prompt) r.text += "<|im_start|>assistant\n";
  return r;
}

// tests/data/chat-templates/qwen3_vl.jinja
Rendered render_qwen3_vl(const Conversation& c, const RenderOptions& options) {
  Rendered r;
  const Message& first = c.messages.front();
  const std::string system = first.role == "system" ? render_text_only(first) : std::string();
  if (!c.tools.empty()) {
    render_tools_header(r.text, c, system);
  } else if (first.role == "system") {
    r.text += "<|im_start|>system\n" + system;
    r.text += kImEnd;
  }
  VisionCount n;
  for (std::size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    if (m.role == "user") {
      r.text += "<|im_start|>user\n" + render_content(m, n, true, options);
      r.text += kImEnd;
    } else if (m.role == "assistant") {
      r.text += "<|im_start|>assistant\n";
      const std::size_t begin = r.text.size();
      r.text += render_text_only(m);
      render_tool_calls(r.text, m, m.has_content());
      end_assistant_turn(r, begin, {begin, begin});
    } else if (m.role == "tool") {
      render_tool_response(r.text, c, i, render_content(m, n, true, options));
    }  // system messages after the first are not rendered
  }
  if (options.add_generation_prompt) r.text += "<|im_start|>assistant\n";
  return r;
}

// tests/data/chat-templates/qwen3_vl_thinking.jinja
Rendered render_qwen3_vl_thinking(const Conversation& c, const RenderOptions& options) {
  Rendered r;
  VisionCount n;
  const Message& first = c.messages.front();
  const std::string system = first.role == "system" ? render_content(first, n, false, options) : std::string();
  if (!c.tools.empty()) {
    render_tools_header(r.text, c, system);
  } else if (first.role == "system") {
    r.text += "<|im_start|>system\n" + system;
    r.text += kImEnd;
  }
  // The last user query: the last user message that is not a tool response it carries itself.
  std::size_t last_query = c.messages.size() - 1;
  for (std::size_t i = c.messages.size(); i-- > 0;) {
    if (c.messages[i].role != "user") continue;
    const std::string content = render_content(c.messages[i], n, false, options);
    if (!(content.starts_with("<tool_response>") && content.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (std::size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    std::string content = render_content(m, n, true, options);  // counted for every message
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      r.text += "<|im_start|>" + m.role + "\n" + content;
      r.text += kImEnd;
    } else if (m.role == "assistant") {
      std::string reasoning;
      if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
      } else if (const std::size_t close = content.find("</think>"); close != std::string::npos) {
        std::string_view before = strip_newlines_right(std::string_view(content).substr(0, close));
        if (const std::size_t open = before.rfind("<think>"); open != std::string_view::npos) {
          before.remove_prefix(open + 7);
        }
        reasoning = std::string(strip_newlines_left(before));
        content = std::string(strip_newlines_left(std::string_view(content).substr(content.rfind("</think>") + 8)));
      }
      r.text += "<|im_start|>assistant\n";
      const std::size_t begin = r.text.size();
      ByteSpan think{begin, begin};
      if (i > last_query && (i + 1 == c.messages.size() || !reasoning.empty())) {
        r.text += "<think>\n";
        r.text += strip_newlines_right(strip_newlines_left(reasoning));
        r.text += "\n</think>\n\n";
        think.end = r.text.size();
        r.text += strip_newlines_left(content);
      } else {
        r.text += content;
      }
      render_tool_calls(r.text, m, !content.empty());
      end_assistant_turn(r, begin, think);
    } else if (m.role == "tool") {
      render_tool_response(r.text, c, i, content);
    }
  }
  if (options.add_generation_prompt) r.text += "<|im_start|>assistant\n<think>\n";
  return r;
}

std::string_view template_name(ChatTemplate tmpl) {
  for (const auto& [t, name] : kTemplateNames) {
    if (t == tmpl) return name;
  }
  return "unknown";
}

}  // namespace

Result<ChatTemplate> chat_template(std::string_view name) {
  if (name == "qwen2-vl" || name == "qwen2.5-vl") return ChatTemplate::kQwen2VL;
  if (name == "qwen3-vl") return ChatTemplate::kQwen3VL;
  if (name == "qwen3-vl-thinking") return ChatTemplate::kQwen3VLThinking;
  if (name.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 "chat template name is empty (known: qwen2-vl, qwen2.5-vl, qwen3-vl, qwen3-vl-thinking)");
  }
  return chat_template_file(std::string(name));
}

Result<Rendered> render_chat(const Conversation& c, ChatTemplate tmpl, const RenderOptions& options) {
  if (c.messages.empty()) return Error(ErrorCode::kInvalidArgument, "conversation has no messages");
  switch (tmpl) {
    case ChatTemplate::kQwen2VL: return render_qwen2_vl(c, options);
    case ChatTemplate::kQwen3VL: return render_qwen3_vl(c, options);
    case ChatTemplate::kQwen3VLThinking: return render_qwen3_vl_thinking(c, options);
  }
  return Error(ErrorCode::kInvalidArgument, "unknown chat template");
}

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
                   "the " + std::string(template_name(tmpl)) + " template renders " + std::to_string(rendered) +
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
