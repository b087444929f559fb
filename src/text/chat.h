// Conversations: the manifest's formats normalised to one form, rendered with the model's chat
// template (in C++, no Jinja engine: only templates we reproduce exactly), and encoded for
// supervised fine-tuning with labels, attention mask and optional mrope position ids.
//
// Formats read (one JSON object per sample):
//   Qwen/OpenAI  {"messages": [{"role": "user", "content": "text" | [{"type": "image", "image": uri},
//                                                                {"type": "text", "text": ...}]}]}
//   LLaVA        {"conversations": [{"from": "human"|"gpt"|"system", "value": "<image>\nWhat is it?"}],
//                 "image": uri | [uri, ...]}
//   ShareGPT     {"conversations": [{"from": "user"|"assistant"|..., "value": ...}], "images": [...]}
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(Conversation c, parse_conversation(line));
//   MMFEED_ASSIGN_OR_RETURN(Rendered r, render_chat(c, ChatTemplate::kQwen2VL, {}));
//   MMFEED_ASSIGN_OR_RETURN(SftSample s, encode_conversation(tokenizer, c, ChatTemplate::kQwen2VL, grids, {}));
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

struct ContentItem {
  enum class Type { kText, kImage, kVideo };
  Type type = Type::kText;
  std::string value;  // the text, or the image/video URI
};

struct Message {
  std::string role;  // "system", "user", "assistant" (others are rendered as given)
  bool content_is_string = false;
  std::vector<ContentItem> content;  // one text item when content_is_string
};

struct Conversation {
  std::string id;
  std::vector<Message> messages;

  std::size_t count(ContentItem::Type type) const;
  // Image (or video) URIs in order of appearance.
  std::vector<std::string> media(ContentItem::Type type) const;
};

// Parses one sample in any of the formats above. Errors (kCorruptData) name the JSON path at
// fault and what was expected there: "messages must be a list of messages, got an object",
// "messages[1].content[0].text must be a string, got a number", "messages[0] has no \"role\"
// (expected ...)", an unknown role or speaker, invalid UTF-8 ("malformed JSON: ..."), a
// placeholder count that does not match the images listed. When the sample has an id the
// error's context is "sample <id>".
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

enum class ChatTemplate { kQwen2VL };

// "qwen2-vl" and "qwen2.5-vl" (the same template). Others, "qwen3-vl" included, are refused:
// mmfeed renders only templates whose reference text it can test against.
Result<ChatTemplate> chat_template(std::string_view name);

struct RenderOptions {
  bool add_generation_prompt = false;
  bool add_vision_id = false;
};

struct ByteSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
};

struct Rendered {
  std::string text;
  std::vector<ByteSpan> assistant_content;  // each assistant message's content
  std::vector<ByteSpan> assistant_end;      // its "<|im_end|>\n"
};

Result<Rendered> render_chat(const Conversation& conversation, ChatTemplate tmpl, const RenderOptions& options = {});

enum class LabelPolicy {
  kQwen,         // assistant content + "<|im_end|>" + "\n" (Qwen's recipe, LLaMA-Factory's)
  kContentAndEos,  // assistant content + "<|im_end|>"
};

enum class Truncation {
  kError,     // a sample longer than max_length is an error (the caller may skip it)
  kTruncate,  // cut at max_length, never inside an image's vision block (cut before it)
};

struct Grid3 {
  std::int64_t t = 1, h = 0, w = 0;
};

struct SftOptions {
  LabelPolicy labels = LabelPolicy::kQwen;
  std::size_t max_length = 0;  // 0: no limit
  Truncation truncation = Truncation::kError;
  bool mrope_position_ids = false;
  int merge_size = 2;
  RenderOptions render;
};

struct SftSample {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> labels;  // -100 where not trained
  std::vector<std::int32_t> attention_mask;
  std::vector<std::int32_t> position_ids;  // 3 x L when asked (rows t, h, w)
  std::size_t images_kept = 0;  // after truncation, the first images_kept images remain
  std::size_t videos_kept = 0;
};

inline constexpr std::int32_t kIgnoreIndex = -100;

// Renders, tokenizes the whole text (so ids equal the tokenizer applied to the rendered
// conversation), expands each image pad to t*h*w/merge^2 tokens and each video pad likewise,
// and labels by policy (vision tokens never trained).
Result<SftSample> encode_conversation(const Tokenizer& tokenizer, const Conversation& conversation, ChatTemplate tmpl,
                                      std::span<const Grid3> image_grids, std::span<const Grid3> video_grids,
                                      const SftOptions& options = {});

}  // namespace mmfeed::text
