// Chat templates: a Conversation (conversation.h) rendered with the model's chat template, in C++
// without a Jinja engine: only templates we reproduce exactly (chat.cc: the text and the
// assistant spans labels need; chat_template_text.cc: the published texts).
//
// Templates: Qwen2-VL / Qwen2.5-VL, Qwen3-VL Instruct and Thinking, Qwen3.5 (its two variants), Qwen2.5-Omni,
// Qwen3-Omni Thinking, each identical to
// transformers' apply_chat_template with the published text (chat_template_text) for every
// conversation parse_conversation accepts.
//
// Threads: functions of their arguments alone (chat_template also reads the file it is given),
// callable from any number of threads at once (the Loader's workers each render their own sample).
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(ChatTemplate t, chat_template("qwen3-vl"));
//   MMFEED_ASSIGN_OR_RETURN(Rendered r, render_chat(conversation, t, {}));
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"
#include "text/conversation.h"

namespace mmfeed::text {

enum class ChatTemplate {
  kQwen2VL,            // Qwen2-VL and Qwen2.5-VL
  kQwen3VL,            // Qwen3-VL Instruct
  kQwen3VLThinking,    // Qwen3-VL Thinking
  kQwen3_5,            // Qwen3.5, 4B and larger: thinking on unless enable_thinking is false
  kQwen3_5NoThink,     // Qwen3.5, 2B and smaller: thinking off unless enable_thinking is true
  kQwen2_5Omni,        // Qwen2.5-Omni's processor template: images, videos and audio
  kQwen3OmniThinking,  // Qwen3-Omni Thinking: images, videos and audio
};

// The template by name: "qwen2-vl" and "qwen2.5-vl" (the same template), "qwen3-vl" (Instruct:
// the model's default), "qwen3-vl-thinking", "qwen3.5" (4B and larger: the model's default) and
// "qwen3.5-nothink" (2B and smaller), "qwen2.5-omni" (its processor's template), "qwen3-omni-thinking". Anything else
// is taken as a file: a template text (.jinja), or a JSON object whose "chat_template" is a string (a processor's
// chat_template.json, a tokenizer_config.json). It is accepted only when that text is byte-identical to one of
// chat_template_text's; otherwise refused naming the file (kUnsupported): mmfeed renders only templates it reproduces
// exactly. So is a name that is neither known nor an existing file; one that is not a regular file or over 1 MiB is
// refused before it is read.
//
// Example:
//   chat_template("qwen3-vl")                         // kQwen3VL
//   chat_template("/models/Qwen3-VL-8B-Thinking/chat_template.json")  // kQwen3VLThinking
//   chat_template("my_template.jinja")                // error: not one mmfeed renders
Result<ChatTemplate> chat_template(std::string_view name_or_path);

// The published text of `tmpl` that render_chat reproduces (src/text/templates/).
std::string_view chat_template_text(ChatTemplate tmpl);

// Whether `tmpl` renders audio items (the Omni templates).
inline bool takes_audio(ChatTemplate tmpl) {
  return tmpl == ChatTemplate::kQwen2_5Omni || tmpl == ChatTemplate::kQwen3OmniThinking;
}

// The name of `tmpl` in messages: "Qwen2-VL", "Qwen3-VL Instruct" or "Qwen3-VL Thinking".
std::string_view chat_template_name(ChatTemplate tmpl);

struct RenderOptions {
  bool add_generation_prompt = false;
  bool add_vision_id = false;
  bool add_audio_id = false;  // "Audio N: " before each audio item (the Omni template)
  // Qwen3.5's generation prompt: with thinking ("<think>\n") or without it; nullopt: the
  // template's default. Qwen3-Omni Thinking adds an empty think block when it is false; other
  // templates ignore it.
  std::optional<bool> enable_thinking{};
};

struct ByteSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// What the Qwen-VL templates (and Qwen3-Omni's) render for an image and a video item (after
// "Picture N: " or "Video N: " with add_vision_id); encode_conversation expands each pad to its
// grid's tokens.
inline constexpr std::string_view kImageBlock = "<|vision_start|><|image_pad|><|vision_end|>";
inline constexpr std::string_view kVideoBlock = "<|vision_start|><|video_pad|><|vision_end|>";

// The special tokens a template writes for each medium: a block is start + pad + end (vision
// tokens bound images and videos). Qwen2.5-Omni names its own (<|vision_bos|><|IMAGE|>...); the
// audio ones are empty where the template takes no audio.
struct MediaTokens {
  std::string_view vision_start, vision_end, image_pad, video_pad;
  std::string_view audio_start, audio_end, audio_pad;
};
const MediaTokens& media_tokens(ChatTemplate tmpl);

// The rendered text and, per assistant message in order, the spans labels need.
struct Rendered {
  std::string text;
  // The turn after "<|im_start|>assistant\n" up to its "<|im_end|>": reasoning block (when
  // rendered), content and tool calls.
  std::vector<ByteSpan> assistant_content;
  std::vector<ByteSpan> assistant_end;  // its "<|im_end|>\n"
  // Within assistant_content, "<think>\n...\n</think>\n\n" where the Thinking template renders
  // it (empty span where it does not).
  std::vector<ByteSpan> assistant_think;
};

// Renders as apply_chat_template(messages, tools=conversation.tools, add_generation_prompt,
// add_vision_id, add_audio_id) with chat_template_text(tmpl), byte for byte. Audio items only
// with the Omni templates: the others have no audio branch (Qwen2-VL's would drop the item
// silently), so a conversation with audio is refused there (kUnsupported). Qwen3-Omni Thinking
// numbers nothing, writes a list-form system prompt as one system turn per item (refused beside
// tools, where the template adds a string to the list), renders only text items typed "text", and
// counts only string user messages as queries. Qwen3-VL renders tool messages
// as a user turn of <tool_response> blocks; the Instruct template drops system messages after
// the first; the Thinking template keeps <think> blocks only for assistant turns after the
// last user query (a user message that is not itself a <tool_response>) and splits content at
// </think> when no reasoning_content is given. Qwen2-VL ignores tools, tool calls and reasoning.
Result<Rendered> render_chat(const Conversation& conversation, ChatTemplate tmpl, const RenderOptions& options = {});

}  // namespace mmfeed::text
