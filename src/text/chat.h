// Conversations: the manifest's formats normalised to one form, rendered with the model's chat
// template (in C++, no Jinja engine: only templates we reproduce exactly), and encoded for
// supervised fine-tuning with labels, attention mask and optional mrope position ids.
//
// Formats read (one JSON object per sample):
//   Qwen/OpenAI  {"messages": [{"role": "user", "content": "text" | [{"type": "image", "image": uri},
//                                                                {"type": "text", "text": ...}]},
//                              {"role": "assistant", "content": ..., "reasoning_content": "...",
//                               "tool_calls": [{"function": {"name": "f", "arguments": {...}}}]},
//                              {"role": "tool", "content": ...}],
//                 "tools": [{"type": "function", "function": {...}}, ...]}
//   LLaVA        {"conversations": [{"from": "human"|"gpt"|"system", "value": "<image>\nWhat is it?"}],
//                 "image": uri | [uri, ...]}
//   ShareGPT     {"conversations": [{"from": "user"|"assistant"|..., "value": ...}], "images": [...]}
//   LLaMA-Factory, ms-swift
//                {"messages": [{"role": "user", "content": "<image>Who is this?"}, ...], "images": [uri, ...],
//                 "videos": [...], "system": "...", "tools": "[...]" | [...]}, or their "conversations"
//                 with "from"/"value"; a tool call as a turn of JSON text ("function_call",
//                 "tool_call"), "observation" / "tool_response" a tool's result.
// Media listed beside the turns ("image(s)", "video(s)") are placed, in order, by the <image> and
// <video> placeholders of the turns' text; each must be placed exactly once. Listed audio is
// refused (kUnsupported). A top-level "system" becomes the first message.
//
// Templates: Qwen2-VL / Qwen2.5-VL, and Qwen3-VL Instruct and Thinking, each identical to
// transformers' apply_chat_template with the published text (chat_template_text) for every
// conversation parse_conversation accepts.
//
// Three stages, one file each: parse_conversation (conversation.cc), chat_template and
// render_chat (chat.cc: text and the assistant spans), encode_conversation (chat_encode.cc:
// tokens, vision pads expanded, the loss mask, truncation, mrope ids).
//
// Threads: all are functions of their arguments alone (chat_template also reads the file it is
// given), callable from any number of threads at once (the Loader's workers each render and
// encode their own sample); encode_conversation shares only the Tokenizer, which is safe to
// share (tokenizer.h).
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(Conversation c, parse_conversation(line));
//   MMFEED_ASSIGN_OR_RETURN(ChatTemplate t, chat_template("qwen3-vl"));
//   MMFEED_ASSIGN_OR_RETURN(Rendered r, render_chat(c, t, {}));
//   MMFEED_ASSIGN_OR_RETURN(SftSample s, encode_conversation(tokenizer, c, t, grids, {}));
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"
#include "text/tokenizer.h"

namespace mmfeed::text {

// A video item's sampling and sizing keys, as qwen-vl-utils names them (absent or null: not
// given); the video processor reads those the model's recipe reads and refuses the others.
struct VideoKeys {
  std::optional<double> nframes, fps, min_frames, max_frames, video_start, video_end;
  std::optional<double> min_pixels, max_pixels, total_pixels;
};

struct ContentItem {
  enum class Type { kText, kImage, kVideo };
  Type type = Type::kText;
  std::string value;  // the text, or the image/video URI
  // An image or video item's own "text" key: Qwen3-VL Instruct renders it in the system prompt
  // (where it prints the "text" of every item and skips media), nowhere else.
  std::optional<std::string> media_text;
  VideoKeys video;  // kVideo only
};

// One call of an assistant turn. `arguments` is what the templates print: a string argument as
// given, any other JSON value as `tojson` writes it (python_json.h).
struct ToolCall {
  std::string name;
  std::string arguments;
};

struct Message {
  std::string role;  // "system", "user", "assistant" or "tool"
  bool content_is_string = false;
  std::vector<ContentItem> content;  // one text item when content_is_string; empty when absent
  std::vector<ToolCall> tool_calls;  // assistant turns
  // "reasoning_content" (or, as transformers aliases them, "thinking" or "reasoning": the first
  // that is not null). Only the Qwen3-VL Thinking template renders it.
  std::optional<std::string> reasoning_content;

  // What Jinja's `if message.content` sees: a non-empty string or a non-empty list.
  bool has_content() const { return content_is_string ? !content.front().value.empty() : !content.empty(); }
};

struct Conversation {
  std::string id;
  std::vector<Message> messages;
  std::vector<std::string> tools;  // the sample's "tools", each as `tojson` writes it

  std::size_t count(ContentItem::Type type) const;
  // Image (or video) URIs in order of appearance.
  std::vector<std::string> media(ContentItem::Type type) const;
  // The video items' keys, in order of appearance.
  std::vector<VideoKeys> video_keys() const;
};

// Parses one sample in any of the formats above. Errors (kCorruptData) name the JSON path at
// fault and what was expected there: "messages must be a list of messages, got an object",
// "messages[1].content[0].text must be a string, got a number", "messages[0] has no \"role\"
// (expected ...)", "messages[2].tool_calls[0].function.name must be a string, got null",
// "tools[1] must be an object (a tool's JSON schema), got a string", an unknown role or
// speaker, invalid UTF-8 ("malformed JSON: ..."), a placeholder count that does not match the
// images listed. When the sample has an id the error's context is "sample <id>".
//
// An assistant message with "tool_calls" may omit "content" (rendered as empty, as Jinja
// renders an undefined content). A tool call is {"name", "arguments"}, optionally wrapped in
// {"function": {...}} (OpenAI's form; an empty "function" is ignored, as the templates' `if
// tool_call.function` ignores it); "name" must be a string, "arguments" a string or any JSON
// value. Refused where the templates would print something ill-defined: a missing name or
// arguments, a media item whose "text" is not a string.
Result<Conversation> parse_conversation(std::string_view json);

// The sample's id as parse_conversation reads it (Conversation::id): the top-level "id" of a
// JSON object, a string or an integer (in decimal). nullopt when the line is not JSON, or its
// id is absent, empty or of another type. For naming a sample whose line does not parse as a
// conversation.
//
// Example:
//   sample_id_of(R"({"id": "s7", "messages": {}})")  // "s7"
//   sample_id_of(R"({"id": 42})")                     // "42"
//   sample_id_of("{not json")                         // nullopt
std::optional<std::string> sample_id_of(std::string_view json);

enum class ChatTemplate {
  kQwen2VL,          // Qwen2-VL and Qwen2.5-VL
  kQwen3VL,          // Qwen3-VL Instruct
  kQwen3VLThinking,  // Qwen3-VL Thinking
};

// The template by name: "qwen2-vl" and "qwen2.5-vl" (the same template), "qwen3-vl" (Instruct:
// the model's default) and "qwen3-vl-thinking". Anything else is taken as a file: a template
// text (.jinja), or a JSON object whose "chat_template" is a string (a processor's
// chat_template.json, a tokenizer_config.json). It is accepted only when that text is
// byte-identical to one of chat_template_text's; otherwise refused naming the file (kUnsupported):
// mmfeed renders only templates it reproduces exactly. So is a name that is neither known nor an
// existing file; one that is not a regular file or over 1 MiB is refused before it is read.
//
// Example:
//   chat_template("qwen3-vl")                         // kQwen3VL
//   chat_template("/models/Qwen3-VL-8B-Thinking/chat_template.json")  // kQwen3VLThinking
//   chat_template("my_template.jinja")                // error: not one mmfeed renders
Result<ChatTemplate> chat_template(std::string_view name_or_path);

// The published text of `tmpl` that render_chat reproduces (tests/data/chat-templates/).
std::string_view chat_template_text(ChatTemplate tmpl);

// The name of `tmpl` in messages: "Qwen2-VL", "Qwen3-VL Instruct" or "Qwen3-VL Thinking".
std::string_view chat_template_name(ChatTemplate tmpl);

struct RenderOptions {
  bool add_generation_prompt = false;
  bool add_vision_id = false;
};

struct ByteSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// What every template renders for an image and a video item (after "Picture N: " or "Video N: "
// with add_vision_id); encode_conversation expands each pad to its grid's tokens.
inline constexpr std::string_view kImageBlock = "<|vision_start|><|image_pad|><|vision_end|>";
inline constexpr std::string_view kVideoBlock = "<|vision_start|><|video_pad|><|vision_end|>";

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
// add_vision_id) with chat_template_text(tmpl), byte for byte. Qwen3-VL renders tool messages
// as a user turn of <tool_response> blocks; the Instruct template drops system messages after
// the first; the Thinking template keeps <think> blocks only for assistant turns after the
// last user query (a user message that is not itself a <tool_response>) and splits content at
// </think> when no reasoning_content is given. Qwen2-VL ignores tools, tool calls and reasoning.
Result<Rendered> render_chat(const Conversation& conversation, ChatTemplate tmpl, const RenderOptions& options = {});

// What is trained, for every template: the assistant turns only, as rendered after
// "<|im_start|>assistant\n": content, tool calls and (default, see train_reasoning) the
// <think> block the Thinking template renders, then the end marker by policy. Never system,
// user or tool turns: tool responses are inputs (Qwen3-VL renders them in a user turn).
enum class LabelPolicy {
  kQwen,           // assistant turn + "<|im_end|>" + "\n" (Qwen's recipe, LLaMA-Factory's)
  kContentAndEos,  // assistant turn + "<|im_end|>"
};

enum class Truncation {
  kError,     // a sample longer than max_length is an error (the caller may skip it)
  kTruncate,  // cut at max_length, never inside an image's vision block (cut before it)
};

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
};

struct SftOptions {
  LabelPolicy labels = LabelPolicy::kQwen;
  std::size_t max_length = 0;  // 0: no limit
  Truncation truncation = Truncation::kError;
  bool mrope_position_ids = false;
  int merge_size = 2;
  // mrope's temporal step for videos: 0 steps by one per group (Qwen2-VL); Qwen2.5-VL's
  // vision_config.tokens_per_second (2) scales VideoGrid::second_per_grid_t.
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
};

inline constexpr std::int32_t kIgnoreIndex = -100;

// Renders, tokenizes the whole text (so ids equal the tokenizer applied to the rendered
// conversation, Qwen3-VL's video timestamps written in first), expands each image pad to
// t*h*w/merge^2 tokens and each video pad likewise (per group with timestamps), and labels by
// policy (vision tokens and timestamps never trained). Under max_length the text is tokenized
// only as far as the outcome needs, so a sample of megabytes holds memory for its first tokens
// only: refused, it is counted to twice max_length ("conversation has more than N tokens, more
// than max_length M (counted no further)" beyond that); truncated, to just past the cut.
Result<SftSample> encode_conversation(const Tokenizer& tokenizer, const Conversation& conversation, ChatTemplate tmpl,
                                      std::span<const Grid3> image_grids, std::span<const VideoGrid> videos,
                                      const SftOptions& options = {});

}  // namespace mmfeed::text
