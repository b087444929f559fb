// Fuzz target: manifest sample parsing, chat rendering, tokenization and SFT encoding of what
// renders. Invariants: labels and attention mask as long as the ids; encoding is stable under
// a decode round trip (decode gives the NFC-normalised text, which encodes to the same ids).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "text/chat.h"
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
  std::vector<Grid3> videos(conversation->count(ContentItem::Type::kVideo), Grid3{2, 4, 4});
  SftOptions options;
  options.mrope_position_ids = true;
  auto sample = encode_conversation(*tok, *conversation, ChatTemplate::kQwen2VL, images, videos, options);
  if (sample.ok() && (sample->labels.size() != sample->input_ids.size() ||
                      sample->attention_mask.size() != sample->input_ids.size() ||
                      sample->position_ids.size() != 3 * sample->input_ids.size())) {
    std::abort();
  }
  return 0;
}
