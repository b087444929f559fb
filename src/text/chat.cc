// One file of about 610 lines, on purpose: the templates share their turn, content and tool-call
// writers, which a split would export.
//
// Chat templates chosen by name or file and rendered in C++ (Qwen2-VL, Qwen3-VL Instruct and
// Thinking, Qwen3.5, Qwen2.5-Omni, Qwen3-Omni Thinking, each tested byte-identical to transformers'
// apply_chat_template), with the spans the labels need. Parsing is in conversation.cc, encoding for
// SFT in chat_encode.cc, the published texts in templates/ (embedded at build time).
#include "text/chat.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/python_json.h"

namespace mmfeed::text {

namespace {

// A template given as a file: its text (or a JSON object's "chat_template" string) must equal
// one mmfeed renders.
Result<ChatTemplate> chat_template_file(const std::string& path) {
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{1} << 20;  // the templates are ~5 KB
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return Error(ErrorCode::kUnsupported,
                 "chat template '" + path +
                     "' is neither a known name (qwen2-vl, qwen2.5-vl, qwen3-vl, "
                     "qwen3-vl-thinking, qwen3.5, qwen3.5-nothink, qwen2.5-omni, qwen3-omni-thinking) nor an "
                     "existing file");
  }
  if (!std::filesystem::is_regular_file(status)) {
    return Error(ErrorCode::kUnsupported, "chat template file is not a regular file", path);
  }
  if (const std::uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxBytes) {
    return Error(ErrorCode::kUnsupported,
                 "chat template file of " + std::to_string(size) + " bytes, more than " + std::to_string(kMaxBytes) +
                     "; not a template mmfeed renders",
                 path);
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
  for (const ChatTemplate tmpl :
       {ChatTemplate::kQwen2VL, ChatTemplate::kQwen3VL, ChatTemplate::kQwen3VLThinking, ChatTemplate::kQwen3_5,
        ChatTemplate::kQwen3_5NoThink, ChatTemplate::kQwen2_5Omni, ChatTemplate::kQwen3OmniThinking}) {
    if (text == chat_template_text(tmpl)) return tmpl;
  }
  return Error(ErrorCode::kUnsupported,
               "chat template file '" + path +
                   "' is not byte-identical to a template mmfeed renders (Qwen2-VL, "
                   "Qwen3-VL Instruct, Qwen3-VL Thinking, Qwen3.5, Qwen2.5-Omni, Qwen3-Omni Thinking as published); "
                   "mmfeed renders only templates it reproduces exactly: name one (qwen2-vl, qwen3-vl, "
                   "qwen3-vl-thinking, qwen3.5, qwen3.5-nothink, qwen2.5-omni, qwen3-omni-thinking) or "
                   "render with transformers");
}

constexpr std::string_view kImEnd = "<|im_end|>\n";
constexpr std::string_view kToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// The media counters of the templates' namespaces (image_count, video_count, audio_count).
struct VisionCount {
  int images = 0;
  int videos = 0;
  int audios = 0;
};

// What a template writes for each medium; `typed_text`: it renders only text items typed "text".
struct Blocks {
  std::string_view image, video, audio;
  bool typed_text = false;
};
constexpr Blocks kVisionBlocks{kImageBlock, kVideoBlock, {}};
constexpr Blocks kOmniBlocks{"<|vision_bos|><|IMAGE|><|vision_eos|>", "<|vision_bos|><|VIDEO|><|vision_eos|>",
                             "<|audio_bos|><|AUDIO|><|audio_eos|>"};
constexpr Blocks kQwen3OmniBlocks{kImageBlock, kVideoBlock, "<|audio_start|><|audio_pad|><|audio_end|>", true};

// The tokens of each template's blocks above (tests/text check that they spell them).
constexpr MediaTokens kVisionTokens{"<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", {}, {}, {}};
constexpr MediaTokens kOmniTokens{"<|vision_bos|>", "<|vision_eos|>", "<|IMAGE|>", "<|VIDEO|>",
                                  "<|audio_bos|>",  "<|audio_eos|>",  "<|AUDIO|>"};
constexpr MediaTokens kQwen3OmniTokens{"<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
                                       "<|audio_start|>",  "<|audio_end|>",  "<|audio_pad|>"};

// Appends a message's content as the templates render it: text, and media as vision blocks
// numbered with add_vision_id. `count`: increment the counters first (Qwen3-VL Thinking's
// render_content(..., false) prints the current values without counting). Written straight into
// the rendering, not returned: a message of megabytes is not copied again on its way in.
void render_content(std::string& out, const Message& m, VisionCount& n, bool count, const RenderOptions& options,
                    const Blocks& blocks = kVisionBlocks) {
  for (const ContentItem& item : m.content) {
    switch (item.type) {
      case ContentItem::Type::kText:
        if (!(blocks.typed_text && item.untyped)) out += item.value;
        break;
      case ContentItem::Type::kImage:
        if (count) ++n.images;
        if (options.add_vision_id) out += "Picture " + std::to_string(n.images) + ": ";
        out += blocks.image;
        break;
      case ContentItem::Type::kVideo:
        if (count) ++n.videos;
        if (options.add_vision_id) out += "Video " + std::to_string(n.videos) + ": ";
        out += blocks.video;
        break;
      case ContentItem::Type::kAudio:  // the Omni template only (render_chat refuses audio elsewhere)
        if (count) ++n.audios;
        if (options.add_audio_id) out += "Audio " + std::to_string(n.audios) + ": ";
        out += blocks.audio;
        break;
    }
  }
}

// render_content into a string of its own, for what the templates test or cut.
std::string rendered_content(const Message& m, VisionCount& n, bool count, const RenderOptions& options,
                             const Blocks& blocks = kVisionBlocks) {
  std::string out;
  render_content(out, m, n, count, options, blocks);
  return out;
}

// Appends only the "text" of each item (media skipped unless they carry one): Qwen3-VL
// Instruct's system prompt and assistant content.
void render_text_only(std::string& out, const Message& m) {
  for (const ContentItem& item : m.content) {
    if (item.type == ContentItem::Type::kText) {
      out += item.value;
    } else if (item.media_text) {
      out += *item.media_text;
    }
  }
}

void render_tools_header(std::string& out, const Conversation& c, const std::string& system) {
  out += "<|im_start|>system\n";
  if (c.messages.front().role == "system") {
    out += system;
    out += "\n\n";
  }
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

// A run of tool messages becomes one user turn of <tool_response> blocks: message i's opens
// (before its content) and closes (after it).
void open_tool_response(std::string& out, const Conversation& c, std::size_t i) {
  if (i == 0 || c.messages[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n";
}

void close_tool_response(std::string& out, const Conversation& c, std::size_t i) {
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

// An assistant message's reasoning as the Thinking templates take it: reasoning_content when
// given; else, when `content` holds "</think>", the text before the first one (after the last
// "<think>" there, newlines stripped around it), `content` becoming what follows the last one.
std::string take_reasoning(const Message& m, std::string& content) {
  if (m.reasoning_content) return *m.reasoning_content;
  const std::size_t close = content.find("</think>");
  if (close == std::string::npos) return {};
  std::string_view before = strip_newlines_right(std::string_view(content).substr(0, close));
  if (const std::size_t open = before.rfind("<think>"); open != std::string_view::npos) before.remove_prefix(open + 7);
  std::string reasoning(strip_newlines_left(before));
  content = std::string(strip_newlines_left(std::string_view(content).substr(content.rfind("</think>") + 8)));
  return reasoning;
}

// Closes assistant turn `begin` (after its header): records its spans and ends it.
void end_assistant_turn(Rendered& r, std::size_t begin, ByteSpan think) {
  r.assistant_content.push_back({begin, r.text.size()});
  r.assistant_end.push_back({r.text.size(), r.text.size() + kImEnd.size()});
  r.assistant_think.push_back(think);
  r.text += kImEnd;
}

// A rendering with room for all of `c`: at most its strings and a little markup around each
// (the templates add under 64 bytes per message, item or call, under 1 KiB once). Reserved so
// that a long conversation is not copied as its text doubles (issue 31: 3 times its size held).
Rendered start_rendering(const Conversation& c) {
  std::size_t bytes = 1024;
  for (const std::string& tool : c.tools) bytes += tool.size() + 1;
  for (const Message& m : c.messages) {
    bytes += 64 + (m.reasoning_content ? m.reasoning_content->size() + 64 : 0);
    for (const ContentItem& item : m.content)
      bytes += 64 + item.value.size() + (item.media_text ? item.media_text->size() : 0);
    for (const ToolCall& call : m.tool_calls) bytes += 64 + call.name.size() + call.arguments.size();
  }
  Rendered r;
  r.text.reserve(bytes);
  return r;
}

// src/text/templates/qwen2_vl.jinja and qwen2_5_omni.jinja: one structure, their own
// blocks for each medium.
Rendered render_qwen2_vl(const Conversation& c, const RenderOptions& options, const Blocks& blocks = kVisionBlocks) {
  Rendered r = start_rendering(c);
  VisionCount n;
  for (std::size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    if (i == 0 && m.role != "system") r.text += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
    r.text += "<|im_start|>";
    r.text += m.role;
    r.text += "\n";
    const std::size_t begin = r.text.size();
    render_content(r.text, m, n, true, options, blocks);
    if (m.role == "assistant") {
      end_assistant_turn(r, begin, {begin, begin});
    } else {
      r.text += kImEnd;
    }
  }
  if (options.add_generation_prompt) r.text += "<|im_start|>assistant\n";
  return r;
}

// src/text/templates/qwen3_vl.jinja
Rendered render_qwen3_vl(const Conversation& c, const RenderOptions& options) {
  Rendered r = start_rendering(c);
  const Message& first = c.messages.front();
  std::string system;
  if (first.role == "system") render_text_only(system, first);
  if (!c.tools.empty()) {
    render_tools_header(r.text, c, system);
  } else if (first.role == "system") {
    r.text += "<|im_start|>system\n";
    r.text += system;
    r.text += kImEnd;
  }
  VisionCount n;
  for (std::size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    if (m.role == "user") {
      r.text += "<|im_start|>user\n";
      render_content(r.text, m, n, true, options);
      r.text += kImEnd;
    } else if (m.role == "assistant") {
      r.text += "<|im_start|>assistant\n";
      const std::size_t begin = r.text.size();
      render_text_only(r.text, m);
      render_tool_calls(r.text, m, m.has_content());
      end_assistant_turn(r, begin, {begin, begin});
    } else if (m.role == "tool") {
      open_tool_response(r.text, c, i);
      render_content(r.text, m, n, true, options);
      close_tool_response(r.text, c, i);
    }  // system messages after the first are not rendered
  }
  if (options.add_generation_prompt) r.text += "<|im_start|>assistant\n";
  return r;
}

// The Qwen3-Omni Thinking template's system prompt without tools: a string as one system turn, a
// list as one system turn per item it renders.
void render_omni_system(std::string& out, const Message& system) {
  if (system.content_is_string) {
    out += "<|im_start|>system\n";
    out += system.content.front().value;
    out += kImEnd;
    return;
  }
  for (const ContentItem& item : system.content) {
    if (item.type == ContentItem::Type::kText && item.untyped) continue;
    out += "<|im_start|>system\n";
    switch (item.type) {
      case ContentItem::Type::kText: out += item.value; break;
      case ContentItem::Type::kImage: out += kQwen3OmniBlocks.image; break;
      case ContentItem::Type::kVideo: out += kQwen3OmniBlocks.video; break;
      case ContentItem::Type::kAudio: out += kQwen3OmniBlocks.audio; break;
    }
    out += kImEnd;
  }
}

// src/text/templates/qwen3_vl_thinking.jinja and, with `omni`, qwen3_omni_thinking.jinja:
// one structure. The Omni template has its own blocks (audio among them, never numbered), its own
// system prompt (render_omni_system), counts only string user messages as queries, and its own
// generation prompt.
Result<Rendered> render_thinking(const Conversation& c, const RenderOptions& options, bool omni) {
  const Blocks& blocks = omni ? kQwen3OmniBlocks : kVisionBlocks;
  RenderOptions numbering = options;
  if (omni) numbering.add_vision_id = numbering.add_audio_id = false;
  Rendered r = start_rendering(c);
  VisionCount n;
  const Message& first = c.messages.front();
  if (omni && !c.tools.empty() && first.role == "system" && !first.content_is_string) {
    return Error(ErrorCode::kInvalidArgument,
                 "the Qwen3-Omni Thinking template refuses this conversation: with tools, the system message's "
                 "content must be a string (the template adds text to it; transformers raises a TypeError)");
  }
  const std::string system =
      first.role == "system" ? rendered_content(first, n, false, numbering, blocks) : std::string();
  if (!c.tools.empty()) {
    render_tools_header(r.text, c, system);
  } else if (first.role == "system" && omni) {
    render_omni_system(r.text, first);
  } else if (first.role == "system") {
    r.text += "<|im_start|>system\n";
    r.text += system;
    r.text += kImEnd;
  }
  // The last user query: the last user message that is not a tool response it carries itself
  // (for the Omni template, a string one); none: the last message.
  std::size_t last_query = c.messages.size() - 1;
  for (std::size_t i = c.messages.size(); i-- > 0;) {
    const Message& m = c.messages[i];
    if (m.role != "user" || (omni && !m.content_is_string)) continue;
    const std::string content = rendered_content(m, n, false, numbering, blocks);
    if (!(content.starts_with("<tool_response>") && content.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (std::size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    std::string content = rendered_content(m, n, true, numbering, blocks);  // counted for every message
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      r.text += "<|im_start|>";
      r.text += m.role;
      r.text += "\n";
      r.text += content;
      r.text += kImEnd;
    } else if (m.role == "assistant") {
      const std::string reasoning = take_reasoning(m, content);
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
      open_tool_response(r.text, c, i);
      r.text += content;
      close_tool_response(r.text, c, i);
    }
  }
  if (options.add_generation_prompt && !omni) r.text += "<|im_start|>assistant\n<think>\n";
  if (options.add_generation_prompt && omni) {
    r.text +=
        options.enable_thinking == false ? "<|im_start|>assistant\n<think>\n\n</think>\n\n" : "<|im_start|>assistant\n";
  }
  return r;
}

// The length of the whitespace character `s` starts with (Python's str.isspace(), which Jinja's
// trim strips), or 0.
std::size_t space_at_front(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = static_cast<unsigned char>(s[0]);
  if (b == ' ' || (b >= 0x09 && b <= 0x0d) || (b >= 0x1c && b <= 0x1f)) return 1;
  static constexpr std::string_view kWide[] = {"\u0085", "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003",
                                               "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a",
                                               "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"};
  for (std::string_view w : kWide) {
    if (s.starts_with(w)) return w.size();
  }
  return 0;
}
std::size_t space_at_back(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = static_cast<unsigned char>(s.back());
  if (b == ' ' || (b >= 0x09 && b <= 0x0d) || (b >= 0x1c && b <= 0x1f)) return 1;
  for (std::size_t n = 2; n <= 3 && n <= s.size(); ++n) {
    if (space_at_front(s.substr(s.size() - n)) == n) return n;
  }
  return 0;
}

// Jinja's |trim: Python's str.strip().
std::string_view trim(std::string_view s) {
  while (const std::size_t n = space_at_front(s)) s.remove_prefix(n);
  while (const std::size_t n = space_at_back(s)) s.remove_suffix(n);
  return s;
}

constexpr std::string_view kQwen3_5Tools =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in "
    "natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer "
    "the question like normal with your current knowledge and do not tell the user about function calls\n"
    "</IMPORTANT>";

Error template_error(std::string_view what) {
  return Error(ErrorCode::kInvalidArgument, "the Qwen3.5 template refuses this conversation: " + std::string(what));
}

// A message's content as Qwen3.5's render_content writes it, trimmed; media in a system message
// are refused as the template refuses them.
Result<std::string> qwen3_5_content(const Message& m, VisionCount& n, bool count, const RenderOptions& options,
                                    bool system) {
  if (system) {
    for (const ContentItem& item : m.content) {
      if (item.type == ContentItem::Type::kImage) return template_error("System message cannot contain images.");
      if (item.type == ContentItem::Type::kVideo) return template_error("System message cannot contain videos.");
    }
  }
  std::string out = rendered_content(m, n, count, options);
  const std::string_view kept = trim(out);
  if (kept.size() != out.size()) out = std::string(kept);
  return out;
}

void render_qwen3_5_calls(std::string& out, const Message& m, bool has_content) {
  for (std::size_t k = 0; k < m.tool_calls.size(); ++k) {
    const ToolCall& call = m.tool_calls[k];
    out += k > 0         ? "\n<tool_call>\n<function="
           : has_content ? "\n\n<tool_call>\n<function="
                         : "<tool_call>\n<function=";
    out += call.name;
    out += ">\n";
    for (const auto& [name, value] : *call.parameters) {
      out += "<parameter=";
      out += name;
      out += ">\n";
      out += value;
      out += "\n</parameter>\n";
    }
    out += "</function>\n</tool_call>";
  }
}

// src/text/templates/qwen3_5.jinja and qwen3_5_nothink.jinja (`thinking`: the default of
// enable_thinking).
Result<Rendered> render_qwen3_5(const Conversation& c, const RenderOptions& options, bool thinking) {
  Rendered r = start_rendering(c);
  VisionCount n;
  const Message& first = c.messages.front();
  std::string system;
  if (first.role == "system") {
    VisionCount none;
    MMFEED_ASSIGN_OR_RETURN(system, qwen3_5_content(first, none, false, options, true));
  }
  if (!c.tools.empty()) {
    r.text += "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>";
    for (const std::string& tool : c.tools) {
      r.text += '\n';
      r.text += tool;
    }
    r.text += kQwen3_5Tools;
    if (!system.empty()) {
      r.text += "\n\n";
      r.text += system;
    }
    r.text += kImEnd;
  } else if (first.role == "system") {
    r.text += "<|im_start|>system\n";
    r.text += system;
    r.text += kImEnd;
  }
  // The last user query: the last user message that is not itself a <tool_response>.
  std::optional<std::size_t> last_query;
  for (std::size_t i = c.messages.size(); i-- > 0;) {
    if (c.messages[i].role != "user") continue;
    VisionCount uncounted;
    MMFEED_ASSIGN_OR_RETURN(std::string content, qwen3_5_content(c.messages[i], uncounted, false, options, false));
    if (!(content.starts_with("<tool_response>") && content.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  if (!last_query) return template_error("No user query found in messages.");
  for (std::size_t i = 0; i < c.messages.size(); ++i) {
    const Message& m = c.messages[i];
    MMFEED_ASSIGN_OR_RETURN(std::string content, qwen3_5_content(m, n, true, options, false));
    if (m.role == "system") {
      if (i > 0) return template_error("System message must be at the beginning.");
    } else if (m.role == "user") {
      r.text += "<|im_start|>user\n";
      r.text += content;
      r.text += kImEnd;
    } else if (m.role == "assistant") {
      const std::string reasoning = take_reasoning(m, content);
      r.text += "<|im_start|>assistant\n";
      const std::size_t begin = r.text.size();
      ByteSpan think{begin, begin};
      if (i > *last_query) {
        r.text += "<think>\n";
        r.text += trim(reasoning);
        r.text += "\n</think>\n\n";
        think.end = r.text.size();
      }
      r.text += content;
      for (const ToolCall& call : m.tool_calls) {
        if (!call.parameters) {
          return template_error("tool call '" + call.name +
                                "' has arguments that are not an object (the template writes each argument as a "
                                "<parameter=...>: give the arguments as a JSON object)");
        }
      }
      render_qwen3_5_calls(r.text, m, !trim(content).empty());
      end_assistant_turn(r, begin, think);
    } else if (m.role == "tool") {
      if (i > 0 && c.messages[i - 1].role != "tool") r.text += "<|im_start|>user";
      r.text += "\n<tool_response>\n";
      r.text += content;
      r.text += "\n</tool_response>";
      if (i + 1 == c.messages.size() || c.messages[i + 1].role != "tool") r.text += kImEnd;
    } else {
      return template_error("Unexpected message role.");
    }
  }
  if (options.add_generation_prompt) {
    const bool think = options.enable_thinking.value_or(thinking);
    r.text += think ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  }
  return r;
}

}  // namespace

Result<ChatTemplate> chat_template(std::string_view name) {
  if (name == "qwen2-vl" || name == "qwen2.5-vl") return ChatTemplate::kQwen2VL;
  if (name == "qwen3-vl") return ChatTemplate::kQwen3VL;
  if (name == "qwen3-vl-thinking") return ChatTemplate::kQwen3VLThinking;
  if (name == "qwen3.5") return ChatTemplate::kQwen3_5;
  if (name == "qwen3.5-nothink") return ChatTemplate::kQwen3_5NoThink;
  if (name == "qwen2.5-omni") return ChatTemplate::kQwen2_5Omni;
  if (name == "qwen3-omni-thinking") return ChatTemplate::kQwen3OmniThinking;
  if (name.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 "chat template name is empty (known: qwen2-vl, qwen2.5-vl, qwen3-vl, qwen3-vl-thinking, qwen3.5, "
                 "qwen3.5-nothink, qwen2.5-omni, qwen3-omni-thinking)");
  }
  return chat_template_file(std::string(name));
}

const MediaTokens& media_tokens(ChatTemplate tmpl) {
  switch (tmpl) {
    case ChatTemplate::kQwen2_5Omni: return kOmniTokens;
    case ChatTemplate::kQwen3OmniThinking: return kQwen3OmniTokens;
    default: return kVisionTokens;
  }
}

Result<Rendered> render_chat(const Conversation& c, ChatTemplate tmpl, const RenderOptions& options) {
  if (c.messages.empty()) return Error(ErrorCode::kInvalidArgument, "conversation has no messages");
  if (!takes_audio(tmpl) && c.count(ContentItem::Type::kAudio) > 0) {
    return Error(ErrorCode::kUnsupported, "the " + std::string(chat_template_name(tmpl)) +
                                              " template renders no audio (its model takes none): an audio item "
                                              "needs an Omni model's template (qwen2.5-omni, qwen3-omni-thinking)");
  }
  switch (tmpl) {
    case ChatTemplate::kQwen2VL: return render_qwen2_vl(c, options);
    case ChatTemplate::kQwen3VL: return render_qwen3_vl(c, options);
    case ChatTemplate::kQwen3VLThinking: return render_thinking(c, options, false);
    case ChatTemplate::kQwen3_5: return render_qwen3_5(c, options, true);
    case ChatTemplate::kQwen3_5NoThink: return render_qwen3_5(c, options, false);
    case ChatTemplate::kQwen2_5Omni: return render_qwen2_vl(c, options, kOmniBlocks);
    case ChatTemplate::kQwen3OmniThinking: return render_thinking(c, options, true);
  }
  return Error(ErrorCode::kInvalidArgument, "unknown chat template");
}

}  // namespace mmfeed::text
