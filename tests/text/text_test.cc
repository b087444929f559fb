#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

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

// The message of parse_conversation's error for `json`, context included.
std::string error_of(std::string_view json) {
  auto r = parse_conversation(json);
  if (r.ok()) return "parsed";
  EXPECT_EQ(r.error().code(), ErrorCode::kCorruptData) << json;
  return r.error().to_string();
}

// Issue 15: each of these was reported as something else ("sample has neither ...", "content
// item without text, image or video", "has no role" for a role that is there).
TEST(ChatTest, MessagesThatAreNotAListNameWhatTheyAre) {
  EXPECT_EQ(error_of(R"({"messages": {}})"), "messages must be a list of messages, got an object");
  EXPECT_EQ(error_of(R"({"messages": "hi"})"), "messages must be a list of messages, got a string");
  EXPECT_EQ(error_of(R"({"conversations": {}})"), "conversations must be a list of turns, got an object");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": "hi"}])"), "sample must be a JSON object, got a list");
}

TEST(ChatTest, AMessageThatIsNotAnObjectIsNamed) {
  EXPECT_EQ(error_of(R"({"messages": [5]})"), R"(messages[0] must be an object with "role" and "content", got a number)");
  EXPECT_EQ(error_of(R"({"conversations": ["hi"]})"),
            R"(conversations[0] must be an object with "from" and "value", got a string)");
}

TEST(ChatTest, ANonStringTextNamesItsPath) {
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "q"},
                                      {"role": "user", "content": [{"type": "text", "text": 5}]}]})"),
            "messages[1].content[0].text must be a string, got a number");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"text": null}]}]})"),
            "messages[0].content[1].text must be a string, got null");
}

TEST(ChatTest, ContentOfTheWrongTypeIsNamed) {
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": 5}]})"),
            "messages[0].content must be a string or a list of content items, got a number");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [["hi"]]}]})"),
            "messages[0].content[0] must be an object (a text, image or video item), got a list");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "image", "image": 5}]}]})"),
            "messages[0].content[0].image must be a string (the image's URI), got a number");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"image_url": {"uri": "a.jpg"}}]}]})"),
            "messages[0].content[0].image_url must be a URI or an object with a string \"url\", got an object");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "image", "text": "a.jpg"}]}]})"),
            "messages[0].content[0] has type 'image' but no \"image\" or \"image_url\"");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "video", "video": true}]}]})"),
            "messages[0].content[0].video must be a string (the video's URI), got a boolean");
  EXPECT_EQ(error_of(R"({"id": "s7", "messages": [{"role": "user", "content": [{"type": "audio"}]}]})"),
            "sample s7: messages[0].content[0] has no \"text\", \"image\" or \"video\" (type 'audio')");
}

TEST(ChatTest, AMissingOrNonStringRoleIsNamed) {
  EXPECT_EQ(error_of(R"({"messages": [{"content": "x"}]})"),
            R"(messages[0] has no "role" (expected "system", "user", "assistant" or "tool"))");
  EXPECT_EQ(error_of(R"({"messages": [{"role": 5, "content": "x"}]})"), "messages[0].role must be a string, got a number");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "wizard", "content": "x"}]})"),
            R"(messages[0] has unknown role 'wizard' (expected "system", "user", "assistant" or "tool"))");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user"}]})"),
            R"(messages[0] has no "content" (expected a string or a list of content items))");
}

TEST(ChatTest, LlavaTurnsOfTheWrongTypeAreNamed) {
  EXPECT_EQ(error_of(R"({"conversations": [{"from": "human", "value": 5}]})"),
            "conversations[0].value must be a string, got a number");
  EXPECT_EQ(error_of(R"({"conversations": [{"from": null, "value": "hi"}]})"),
            "conversations[0].from must be a string, got null");
  EXPECT_EQ(error_of(R"({"conversations": [{"from": "human", "value": "<image>"}], "image": 5})"),
            "image must be a URI or a list of URIs, got a number");
  EXPECT_EQ(error_of(R"({"conversations": [{"from": "human", "value": "<image>"}], "images": ["a.jpg", 5]})"),
            "images[1] must be a string (a URI), got a number");
}

TEST(ChatTest, ANumericIdNamesTheSampleInErrors) {
  EXPECT_EQ(error_of(R"({"id": 7, "messages": {}})"), "sample 7: messages must be a list of messages, got an object");
  EXPECT_EQ(parse_conversation(R"({"id": 7, "messages": [{"role": "user", "content": "hi"}]})")->id, "7");
}

TEST(SampleIdTest, ReadsTheIdOfALineThatIsNotAConversation) {
  EXPECT_EQ(sample_id_of(R"({"id": "s7", "messages": {}})"), "s7");
  EXPECT_EQ(sample_id_of(R"({"messages": [], "id": 42})"), "42");
  EXPECT_EQ(sample_id_of(R"({"id": "caf\u00e9"})"), "caf\xc3\xa9");
}

TEST(SampleIdTest, NoIdWhenItCannotBeRead) {
  EXPECT_EQ(sample_id_of("{\"id\": \"s7\", \"messages\": [}"), std::nullopt);  // malformed JSON
  EXPECT_EQ(sample_id_of(R"({"messages": []})"), std::nullopt);
  EXPECT_EQ(sample_id_of(R"({"id": ""})"), std::nullopt);
  EXPECT_EQ(sample_id_of(R"({"id": 1.5})"), std::nullopt);
  EXPECT_EQ(sample_id_of(R"({"id": {"k": 1}})"), std::nullopt);
  EXPECT_EQ(sample_id_of(R"(["s7"])"), std::nullopt);
  EXPECT_EQ(sample_id_of(""), std::nullopt);
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
