// Conversations: the manifest's sample formats normalised to one form (conversation.cc). The
// chat templates render it (chat.h), encode_conversation encodes it for training (chat_encode.h).
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
// Media listed beside the turns ("image(s)", "video(s)", "audio(s)") are placed, in order, by the
// <image>, <video> and <audio> placeholders of the turns' text; each must be placed exactly once.
// A top-level "system" becomes the first message. TRL's and transformers' processor form, content
// items {"type": "image"} naming no image, take the listed images in order (videos, audio alike).
// Audio items: {"type": "audio", "audio": uri} (or "audio_url"), with qwen-omni-utils'
// "audio_start" / "audio_end" seconds; only the Omni templates render them (chat.h). A top-level
// "use_audio_in_video" (a boolean) says whether the sample's videos bring their soundtracks.
//
// Threads: functions of their arguments alone, callable from any number of threads at once.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(Conversation c, parse_conversation(line));
//   c.media(ContentItem::Type::kImage)  // the image URIs, in order
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed::text {

// A video item's sampling and sizing keys, as qwen-vl-utils names them (absent or null: not
// given); the video processor reads those the model's recipe reads and refuses the others.
struct VideoKeys {
  std::optional<double> nframes, fps, min_frames, max_frames, video_start, video_end;
  std::optional<double> min_pixels, max_pixels, total_pixels;
};

// An audio item's crop, in seconds, as qwen-omni-utils names it (absent or null: not given).
struct AudioKeys {
  std::optional<double> audio_start, audio_end;
};

struct ContentItem {
  enum class Type { kText, kImage, kVideo, kAudio };
  Type type = Type::kText;
  std::string value;  // the text, or the medium's URI
  // An image or video item's own "text" key: Qwen3-VL Instruct renders it in the system prompt
  // (where it prints the "text" of every item and skips media), nowhere else.
  std::optional<std::string> media_text;
  VideoKeys video;  // kVideo only
  AudioKeys audio;  // kAudio only
  // A text item of a content list whose "type" is not "text" (absent, or another type): the
  // Qwen3-Omni template renders only items typed "text", the others any item with a "text".
  bool untyped = false;
};

// One call of an assistant turn. `arguments` is what the templates print: a string argument as
// given, any other JSON value as `tojson` writes it (python_json.h).
struct ToolCall {
  std::string name;
  std::string arguments;
  // When "arguments" is a JSON object: each key, in order, with its value as Qwen3.5's template
  // writes it (a list or an object as tojson, anything else as Jinja's |string:
  // append_python_str). nullopt for other arguments, which that template cannot render.
  std::optional<std::vector<std::pair<std::string, std::string>>> parameters;
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
  // The sample's "use_audio_in_video" (true or false; absent or null: not given): whether its
  // videos bring their soundtracks (Qwen2.5-Omni).
  std::optional<bool> use_audio_in_video;

  std::size_t count(ContentItem::Type type) const;
  // Image (video, audio) URIs in order of appearance.
  std::vector<std::string> media(ContentItem::Type type) const;
  // The media items' types (image, video, audio), in order of appearance.
  std::vector<ContentItem::Type> media_kinds() const;
  // The video (audio) items' keys, in order of appearance.
  std::vector<VideoKeys> video_keys() const;
  std::vector<AudioKeys> audio_keys() const;
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
// Whether each media item must name its medium: the Loader's samples must (an item's own source,
// or the next of the sample's "images"/"videos"/"audios"); rendering and encoding a conversation
// alone (mmfeed::render_chat, encode_conversation: the grids are given) need none, so that
// {"type": "image"} renders a placeholder as apply_chat_template renders it (an empty value).
enum class MediaSources { kRequired, kOptional };

Result<Conversation> parse_conversation(std::string_view json, MediaSources sources = MediaSources::kRequired);

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

}  // namespace mmfeed::text
