#include <gtest/gtest.h>

#include "text/chat.h"
#include "text/tokenizer.h"

namespace mmfeed::text {
namespace {

const Tokenizer& qwen() {
  static const std::unique_ptr<Tokenizer> tok =
      Tokenizer::from_file(MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json").value();
  return *tok;
}

TEST(TokenizerTest, EncodesAndDecodesKnownIds) {
  const auto ids = qwen().encode("Hello, world").value();
  EXPECT_EQ(ids, (std::vector<std::int32_t>{9707, 11, 1879}));
  EXPECT_EQ(qwen().decode(ids), "Hello, world");
  EXPECT_EQ(qwen().token_to_id("<|im_end|>"), 151645);
}

TEST(TokenizerTest, OffsetsCoverTheInput) {
  const std::string text = "<|im_start|>user\nCaf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87";
  const Encoding enc = qwen().encode_with_offsets(text).value();
  ASSERT_EQ(enc.ids.size(), enc.offsets.size());
  EXPECT_EQ(enc.offsets.front(), (std::pair<std::uint32_t, std::uint32_t>{0, 12}));
  EXPECT_EQ(enc.offsets.back().second, text.size());
  for (std::size_t i = 1; i < enc.offsets.size(); ++i) EXPECT_LE(enc.offsets[i - 1].first, enc.offsets[i].first);
}

TEST(TokenizerTest, InvalidUtf8IsRefused) {
  auto r = qwen().encode("abc\xff");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
}

TEST(TokenizerTest, MalformedJsonIsAnError) {
  EXPECT_FALSE(Tokenizer::from_json("{").ok());
  EXPECT_EQ(Tokenizer::from_json(R"({"model": {"type": "Unigram"}})").error().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(Tokenizer::from_file("/nonexistent.json").error().code(), ErrorCode::kNotFound);
}

TEST(ChatTest, InvalidUtf8InAManifestLineIsAnError) {
  auto r = parse_conversation("{\"messages\": [{\"role\": \"user\", \"content\": \"a\xff\"}]}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("malformed JSON"), std::string::npos);
}

TEST(ChatTest, RendersTheDefaultSystemPromptAndSpans) {
  const Conversation c =
      parse_conversation(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})")
          .value();
  const Rendered r = render_chat(c, ChatTemplate::kQwen2VL).value();
  EXPECT_EQ(r.text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\nyo<|im_end|>\n");
  ASSERT_EQ(r.assistant_content.size(), 1u);
  EXPECT_EQ(r.text.substr(r.assistant_content[0].begin, 2), "yo");
  EXPECT_EQ(r.text.substr(r.assistant_end[0].begin, 11), "<|im_end|>\n");
}

TEST(ChatTest, LabelsTrainOnlyTheReply) {
  const Conversation c =
      parse_conversation(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})")
          .value();
  const SftSample s = encode_conversation(qwen(), c, ChatTemplate::kQwen2VL, {}, {}).value();
  std::vector<std::int32_t> trained;
  for (std::size_t i = 0; i < s.labels.size(); ++i) {
    if (s.labels[i] != kIgnoreIndex) trained.push_back(s.input_ids[i]);
  }
  EXPECT_EQ(qwen().decode(trained), "yo<|im_end|>\n");
}

}  // namespace
}  // namespace mmfeed::text
