// Fuzz target: manifest sample parsing (tools, tool calls, reasoning included), chat rendering
// with each template (Qwen2-VL, Qwen3-VL Instruct and Thinking), tokenization and SFT encoding of
// what renders. Invariants: one set of spans per assistant message, each inside the text (the
// think block inside its turn, the turn ending at its "<|im_end|>\n"); labels and attention mask
// as long as the ids; encoding is stable under a decode round trip (decode gives the
// NFC-normalised text, which encodes to the same ids).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "text/chat_encode.h"
#include "text/tokenizer.h"

#ifndef MMFEED_TOKENIZER_JSON
#error "MMFEED_TOKENIZER_JSON must name the test tokenizer.json"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::text;
  static const std::unique_ptr<Tokenizer> tok = Tokenizer::from_file(MMFEED_TOKENIZER_JSON).value();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (auto ids = tok->encode(input); ids.ok()) {
    const auto again = tok->encode(tok->decode(*ids));
    if (!again.ok() || *again != *ids) std::abort();
  }
  auto conversation = parse_conversation(input);
  if (!conversation.ok()) return 0;
  std::vector<Grid3> images(conversation->count(ContentItem::Type::kImage), Grid3{1, 4, 4});
  std::vector<VideoGrid> videos(conversation->count(ContentItem::Type::kVideo), VideoGrid{{2, 4, 4}, 1.0, {0.5, 1.5}});
  const std::vector<std::int64_t> audio_tokens(conversation->count(ContentItem::Type::kAudio), 3);
  std::size_t assistants = 0;
  for (const Message& m : conversation->messages) assistants += m.role == "assistant";
  const bool has_audio = conversation->count(ContentItem::Type::kAudio) > 0;
  for (const ChatTemplate tmpl :
       {ChatTemplate::kQwen2VL, ChatTemplate::kQwen3VL, ChatTemplate::kQwen3VLThinking, ChatTemplate::kQwen3_5,
        ChatTemplate::kQwen3_5NoThink, ChatTemplate::kQwen2_5Omni, ChatTemplate::kQwen3OmniThinking}) {
    for (const bool vision_id : {false, true}) {
      const auto rendered =
          render_chat(*conversation, tmpl, {.add_generation_prompt = vision_id, .add_vision_id = vision_id});
      // Every parsed conversation renders, but with Qwen3.5's template, which refuses some (no
      // user query, a late system message, media in the system prompt, arguments not an object),
      // Qwen3-Omni Thinking's (a list-form system prompt beside tools), and audio where the
      // template takes none.
      const bool may_refuse = tmpl == ChatTemplate::kQwen3_5 || tmpl == ChatTemplate::kQwen3_5NoThink ||
                              tmpl == ChatTemplate::kQwen3OmniThinking || (has_audio && !takes_audio(tmpl));
      if (!rendered.ok() && may_refuse) continue;
      if (!rendered.ok()) std::abort();
      const Rendered& r = *rendered;
      if (r.assistant_content.size() != assistants || r.assistant_end.size() != assistants ||
          r.assistant_think.size() != assistants) {
        std::abort();
      }
      for (std::size_t k = 0; k < assistants; ++k) {
        const ByteSpan turn = r.assistant_content[k], think = r.assistant_think[k], end = r.assistant_end[k];
        if (turn.begin > turn.end || turn.end != end.begin || end.end > r.text.size() ||
            r.text.compare(end.begin, end.end - end.begin, "<|im_end|>\n") != 0 || think.begin != turn.begin ||
            think.end < think.begin || think.end > turn.end) {
          std::abort();
        }
      }
    }
    SftOptions options;
    options.mrope_position_ids = true;
    options.train_reasoning = tmpl != ChatTemplate::kQwen3VLThinking;
    auto sample = encode_conversation(*tok, *conversation, tmpl, images, videos, audio_tokens, options);
    if (sample.ok() && (sample->labels.size() != sample->input_ids.size() ||
                        sample->attention_mask.size() != sample->input_ids.size() ||
                        sample->position_ids.size() != 3 * sample->input_ids.size())) {
      std::abort();
    }
  }
  return 0;
}
