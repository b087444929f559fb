#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "qwen_tokenizer.h"
#include "text/chat_encode.h"
#include "text/python_json.h"
#include "text/tokenizer.h"

namespace mmfeed::text {
namespace {

TEST(TokenizerTest, EncodesAndDecodesKnownIds) {
  const auto ids = qwen().encode("Hello, world").value();
  EXPECT_EQ(ids, (std::vector<std::int32_t>{9707, 11, 1879}));
  EXPECT_EQ(qwen().decode(ids), "Hello, world");
  EXPECT_EQ(qwen().token_to_id("<|im_end|>"), 151645);
}

// One text through every path of encode: added tokens (special and not), NFC (a combining
// accent), the U+11A7 jamo utf8proc mishandles, CJK, Hangul, Arabic, Devanagari, a ZWJ emoji,
// digits split one by one, "\r\n" and tabs in code. Expected ids from Hugging Face `tokenizers`
// 0.23.3 on the same tokenizer.json:
//   Tokenizer.from_file("tests/data/qwen3-tokenizer/tokenizer.json")
//       .encode(text, add_special_tokens=False).ids
// with `text` the Python string spelled by the C++ literal below.
TEST(TokenizerTest, MultilingualTextWithSpecialTokensMatchesHuggingFace) {
  const std::string text =
      "<|im_start|>user\n"
      "Hello, world! Caf\xc3\xa9 vs Cafe\xcc\x81 \xe2\x80\x94 "       // "Café vs Cafe\u0301 —"
      "\xe4\xb8\xad\xe6\x96\x87\xe5\x88\x86\xe8\xaf\x8d\xef\xbc\x8c"  // 中文分词，
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88, "  // 日本語のテキスト
      "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xea\xb0\x80\xe1\x86\xa7, "            // 한국어 가\u11a7
      "\xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9, "                 // العربية
      "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80 "  // हिन्दी
      "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "  // man ZWJ woman ZWJ girl
      "123456789 def f(x):\r\n"
      "\treturn x**2  <|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\nOK.<|im_end|>\n";
  const std::vector<std::int32_t> expected = {
      151644, 872,    198,    9707,   11,     1879,  0,     65671, 6165,   65671,  1959,   72858,  16744,  17177,
      99689,  3837,   101059, 102819, 15767,  56833, 61803, 70534, 11,     130092, 31079,  35509,  124137, 100,
      11,     129071, 11,     84310,  42311,  101,   30484, 99,    43647,  61804,  101,    378,    235,    145233,
      378,    235,    145665, 220,    16,     17,    18,    19,    20,     21,     22,     23,     24,     707,
      282,    2075,   5783,   853,    856,    334,   17,    256,   151652, 151655, 151653, 151645, 198,    151644,
      77091,  198,    151667, 271,    151668, 271,   3925,  13,    151645, 198};
  EXPECT_EQ(qwen().encode(text).value(), expected);
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

// The Qwen3 tokenizer.json with the first occurrence of `from` replaced by `to`.
std::string qwen_json_with(std::string_view from, std::string_view to) {
  std::ifstream in(MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string json = ss.str();
  const std::size_t at = json.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) json.replace(at, from.size(), to);
  return json;
}

// `tokenizers` refuses such a file too; before, the flag was read as false.
TEST(TokenizerTest, AnAddedTokenFlagOfAnotherTypeIsRefused) {
  const auto r = Tokenizer::from_json(qwen_json_with(R"("lstrip": false)", R"("lstrip": "no")"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCorruptData);
  EXPECT_EQ(r.error().message(), R"(tokenizer.json: malformed added token '<|endoftext|>': "lstrip" is not a boolean)");
}

TEST(TokenizerTest, AnAbsentAddedTokenFlagIsFalse) {
  const auto tok = Tokenizer::from_json(qwen_json_with("\"lstrip\": false,\n", "")).value();
  EXPECT_EQ(tok->encode(" <|endoftext|>").value(), (std::vector<std::int32_t>{220, 151643}));
}

// A byte-level BPE tokenizer.json: every byte a token whose id is the byte, "an" (256) and "ban"
// (257) merged, pre-tokenized by Split(`pattern`, Isolated) then ByteLevel.
std::string tiny_tokenizer_json(std::string_view pattern) {
  std::string vocab;
  std::uint32_t shifted = 256;  // GPT-2's byte-level alphabet: bytes not printable move up from 256
  for (std::uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    char entry[32];
    std::snprintf(entry, sizeof entry, "\"\\u%04x\": %u, ", printable ? b : shifted++, b);
    vocab += entry;
  }
  return R"({"model": {"type": "BPE", "vocab": {)" + vocab +
         R"("an": 256, "ban": 257}, "merges": [["a", "n"], ["b", "an"]]},
             "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": ")" +
         std::string(pattern) + R"("}, "behavior": "Isolated", "invert": false},
               {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}})";
}

// An empty match splits the text there and nothing more; once, the gap before it was handed out
// again with each later piece ("banana" encoded as "b" "ban" "banan" "banana"). Expected ids
// from Hugging Face `tokenizers` 0.23.3 on the same file:
//   Tokenizer.from_str(tiny_tokenizer_json(pattern)).encode(text, add_special_tokens=False).ids
TEST(TokenizerTest, Issue31ASplitPatternMatchingEmptyStringsSplitsAsTokenizersDoes) {
  const auto ids = [](std::string_view pattern, std::string_view text) {
    return Tokenizer::from_json(tiny_tokenizer_json(pattern)).value()->encode(text).value();
  };
  EXPECT_EQ(ids("(?=a)", "banana"), (std::vector<std::int32_t>{98, 256, 256, 97}));
  EXPECT_EQ(ids("(?=a)", "bananas ban"), (std::vector<std::int32_t>{98, 256, 256, 97, 115, 32, 98, 256}));
  EXPECT_EQ(ids("a*", "banana"), (std::vector<std::int32_t>{98, 97, 110, 97, 110, 97}));
  EXPECT_EQ(ids("(?=n)|n", "banana"), (std::vector<std::int32_t>{98, 97, 110, 97, 110, 97}));
  EXPECT_EQ(ids("(?=n)|n", "nab"), (std::vector<std::int32_t>{110, 97, 98}));
  EXPECT_EQ(ids("", "ban"), (std::vector<std::int32_t>{98, 97, 110}));
}

// Loads `json`, which must be refused with `code` and exactly `message`, no exception escaping:
// the malformed shapes below once made simdjson throw out of from_json ("The JSON field
// referenced does not exist in this object" in Python) or were read silently.
void expect_refused(const std::string& json, ErrorCode code, std::string_view message) {
  std::optional<Result<std::unique_ptr<Tokenizer>>> r;
  ASSERT_NO_THROW(r.emplace(Tokenizer::from_json(json)));
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->error().code(), code);
  EXPECT_EQ(r->error().message(), message);
}

// The first merge of the Qwen3 file, as it is written there.
constexpr std::string_view kFirstMerge = "\"merges\": [\n      [\n        \"\xc4\xa0\",\n        \"\xc4\xa0\"\n      ]";

TEST(TokenizerJsonTest, ADocumentThatIsNotAnObjectIsRefused) {
  expect_refused("[]", ErrorCode::kCorruptData, "tokenizer.json: the document must be a JSON object, got a list");
}

TEST(TokenizerJsonTest, AMissingModelIsNamed) {
  expect_refused(R"({"version": "1.0"})", ErrorCode::kCorruptData,
                 R"(tokenizer.json: "model" is missing (expected an object with "type": "BPE"))");
}

TEST(TokenizerJsonTest, AModelThatIsNotAnObjectIsNamed) {
  expect_refused(R"({"model": "BPE"})", ErrorCode::kCorruptData,
                 R"(tokenizer.json: "model" must be an object with "type": "BPE", got a string)");
}

TEST(TokenizerJsonTest, AMissingVocabularyIsNamed) {
  expect_refused(R"({"model": {"type": "BPE", "merges": []}})", ErrorCode::kCorruptData,
                 "tokenizer.json: model.vocab is missing (expected an object of token -> id)");
}

TEST(TokenizerJsonTest, AVocabularyThatIsNotAnObjectIsNamed) {
  expect_refused(R"({"model": {"type": "BPE", "vocab": ["a"], "merges": []}})", ErrorCode::kCorruptData,
                 "tokenizer.json: model.vocab must be an object of token -> id, got a list");
}

TEST(TokenizerJsonTest, AVocabularyIdThatIsNotAnIntegerIsNamed) {
  expect_refused(R"({"model": {"type": "BPE", "vocab": {"a": "0"}, "merges": []}})", ErrorCode::kCorruptData,
                 R"(tokenizer.json: model.vocab["a"] must be an id (an integer from 0 to 2147483647), got a string)");
}

// A negative id indexed the id -> token table out of bounds.
TEST(TokenizerJsonTest, AVocabularyIdOutOfRangeIsNamed) {
  expect_refused(R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})", ErrorCode::kCorruptData,
                 R"(tokenizer.json: model.vocab["a"] must be an id (an integer from 0 to 2147483647), got -1)");
}

TEST(TokenizerJsonTest, AMissingMergeListIsNamed) {
  expect_refused(qwen_json_with("\"merges\": [", "\"merged\": ["), ErrorCode::kCorruptData,
                 "tokenizer.json: model.merges is missing (expected a list of merges)");
}

TEST(TokenizerJsonTest, AMergeListThatIsNotAListIsNamed) {
  expect_refused(qwen_json_with("\"merges\": [", "\"merges\": {}, \"unused\": ["), ErrorCode::kCorruptData,
                 "tokenizer.json: model.merges must be a list of merges, got an object");
}

TEST(TokenizerJsonTest, AMergeWrittenAsNumbersIsNamed) {
  expect_refused(qwen_json_with(kFirstMerge, "\"merges\": [[1, 2]"), ErrorCode::kCorruptData,
                 "tokenizer.json: model.merges[0][0] must be a string (a token), got a number");
}

TEST(TokenizerJsonTest, AMergeOfThreeTokensIsNamed) {
  expect_refused(qwen_json_with(kFirstMerge, R"("merges": [["a", "b", "c"])"), ErrorCode::kCorruptData,
                 R"(tokenizer.json: model.merges[0] must be "left right" or ["left", "right"], got a list of 3)");
}

TEST(TokenizerJsonTest, AMergeThatIsNeitherAStringNorAListIsNamed) {
  expect_refused(qwen_json_with(kFirstMerge, R"("merges": [{"a": "b"})"), ErrorCode::kCorruptData,
                 R"(tokenizer.json: model.merges[0] must be "left right" or ["left", "right"], got an object)");
}

TEST(TokenizerJsonTest, AMergeStringWithoutASpaceIsNamed) {
  expect_refused(qwen_json_with(kFirstMerge, R"("merges": ["ab")"), ErrorCode::kCorruptData,
                 R"(tokenizer.json: model.merges[0] 'ab' must be two tokens separated by a space)");
}

TEST(TokenizerJsonTest, ANormalizerThatIsNotAnObjectIsNamed) {
  expect_refused(qwen_json_with(R"("normalizer": {)", R"("normalizer": "NFC", "unused": {)"), ErrorCode::kCorruptData,
                 R"(tokenizer.json: "normalizer" must be an object or null, got a string)");
}

TEST(TokenizerJsonTest, APreTokenizerThatIsNotAnObjectIsNamed) {
  expect_refused(qwen_json_with(R"("pre_tokenizer": {)", R"("pre_tokenizer": [], "unused": {)"),
                 ErrorCode::kCorruptData, R"(tokenizer.json: "pre_tokenizer" must be an object, got a list)");
}

TEST(TokenizerJsonTest, ASequencePreTokenizerWithoutPretokenizersIsNamed) {
  expect_refused(qwen_json_with("\"pretokenizers\": [", "\"pretokenizer\": ["), ErrorCode::kCorruptData,
                 "tokenizer.json: pre_tokenizer of type Sequence has no \"pretokenizers\" (expected a list of "
                 "pre-tokenizers)");
}

TEST(TokenizerJsonTest, PretokenizersThatAreNotAListAreNamed) {
  expect_refused(qwen_json_with("\"pretokenizers\": [", "\"pretokenizers\": {}, \"unused\": ["),
                 ErrorCode::kCorruptData, "tokenizer.json: pre_tokenizer.pretokenizers must be a list, got an object");
}

TEST(TokenizerJsonTest, AddedTokensThatAreNotAListAreNamed) {
  expect_refused(qwen_json_with("\"added_tokens\": [", "\"added_tokens\": {}, \"unused\": ["), ErrorCode::kCorruptData,
                 "tokenizer.json: \"added_tokens\" must be a list of tokens, got an object");
}

TEST(TokenizerJsonTest, AnAddedTokenThatIsNotAnObjectIsNamed) {
  expect_refused(qwen_json_with("\"added_tokens\": [", "\"added_tokens\": [7, "), ErrorCode::kCorruptData,
                 R"(tokenizer.json: added_tokens[0] must be an object with "id" and "content", got a number)");
}

TEST(TokenizerJsonTest, AnAddedTokenWithoutContentIsNamed) {
  expect_refused(qwen_json_with(R"("content": "<|endoftext|>")", R"("contents": "<|endoftext|>")"),
                 ErrorCode::kCorruptData, R"(tokenizer.json: added_tokens[0] has no string "content")");
}

TEST(TokenizerJsonTest, AnAddedTokenIdThatIsNotAnIntegerIsNamed) {
  expect_refused(qwen_json_with(R"("id": 151643)", R"("id": "151643")"), ErrorCode::kCorruptData,
                 R"(tokenizer.json: malformed added token '<|endoftext|>': "id" must be an integer from 0 to )"
                 R"(2147483647, got a string)");
}

// Ids are bounded by the tokens the file defines (Qwen3: 151643 in the vocabulary + 26 added)
// plus 65536 for gaps: before, one id near 2^31 sized the id -> token table from it, gigabytes
// committed because of one number in the file.
TEST(TokenizerJsonTest, AHugeVocabularyIdIsRefusedBeforeAllocating) {
  expect_refused(qwen_json_with(R"("!": 0,)", R"("!": 2147483646,)"), ErrorCode::kCorruptData,
                 R"(tokenizer.json: model.vocab["!"] has id 2147483646, not below 217205 (the 151669 tokens the )"
                 "file defines + 65536 for gaps in ids)");
}

TEST(TokenizerJsonTest, AHugeAddedTokenIdIsRefusedBeforeAllocating) {
  expect_refused(qwen_json_with(R"("id": 151643)", R"("id": 2000000000)"), ErrorCode::kCorruptData,
                 "tokenizer.json: added token '<|endoftext|>' has id 2000000000, not below 217205 (the 151669 "
                 "tokens the file defines + 65536 for gaps in ids)");
}

TEST(TokenizerJsonTest, TheIdBoundIsExact) {
  expect_refused(qwen_json_with(R"("id": 151668)", R"("id": 217205)"), ErrorCode::kCorruptData,
                 "tokenizer.json: added token '</think>' has id 217205, not below 217205 (the 151669 tokens the "
                 "file defines + 65536 for gaps in ids)");
  const auto r = Tokenizer::from_json(qwen_json_with(R"("id": 151668)", R"("id": 217204)"));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r.value()->token_to_id("</think>"), 217204);
  EXPECT_EQ(r.value()->decode({217204}), "</think>");
}

// Gaps within the slack load, the tokens on either side keeping their ids.
TEST(TokenizerJsonTest, AFileWithAGapInItsIdsLoads) {
  std::string json = qwen_json_with(R"("id": 151668)", R"("id": 151700)");
  json.replace(json.find(R"("!": 0,)"), 7, R"("!": 160000,)");
  const auto r = Tokenizer::from_json(json);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Tokenizer& tok = *r.value();
  EXPECT_EQ(tok.token_to_id("</think>"), 151700);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok.encode("Hello, world!</think>").value(), (std::vector<std::int32_t>{9707, 11, 1879, 160000, 151700}));
  EXPECT_EQ(tok.decode({9707, 11, 1879, 160000}), "Hello, world!");
}

// As in `tokenizers`, where only "model" is required.
TEST(TokenizerJsonTest, AnAbsentNormalizerPostProcessorOrDecoderIsNone) {
  std::string json = qwen_json_with(R"("normalizer":)", R"("unused_normalizer":)");
  for (std::string_view key : {R"("post_processor":)", R"("decoder":)"}) {
    json.replace(json.find(key), key.size(), "\"unused_" + std::string(key.substr(1)));
  }
  std::optional<Result<std::unique_ptr<Tokenizer>>> r;
  ASSERT_NO_THROW(r.emplace(Tokenizer::from_json(json)));
  ASSERT_TRUE(r->ok()) << r->error().to_string();
  EXPECT_EQ(r->value()->encode("Hello, world").value(), (std::vector<std::int32_t>{9707, 11, 1879}));
  EXPECT_NE(r->value()->encode("Cafe\xcc\x81").value(), qwen().encode("Cafe\xcc\x81").value());  // no NFC
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
  EXPECT_EQ(error_of(R"({"messages": [5]})"),
            R"(messages[0] must be an object with "role" and "content", got a number)");
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
            "messages[0].content[0] must be an object (a text, image, video or audio item), got a list");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "image", "image": 5}]}]})"),
            "messages[0].content[0].image must be a string (the image's URI), got a number");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"image_url": {"uri": "a.jpg"}}]}]})"),
            "messages[0].content[0].image_url must be a URI or an object with a string \"url\", got an object");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "image", "text": "a.jpg"}]}]})"),
            "messages[0].content[0] has type 'image' but no \"image\", and the sample lists no images left to take "
            "its place");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "video", "video": true}]}]})"),
            "messages[0].content[0].video must be a string (the video's URI), got a boolean");
  EXPECT_EQ(error_of(R"({"id": "s7", "messages": [{"role": "user", "content": [{"type": "audio"}]}]})"),
            "sample s7: messages[0].content[0] has type 'audio' but no \"audio\", and the sample lists no audios left "
            "to take its place");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "audio", "audio": "a.wav",
                                                                    "audio_start": "1s"}]}]})"),
            "messages[0].content[0].audio_start must be a number of seconds, got a string");
  EXPECT_EQ(error_of(R"({"id": "s8", "messages": [{"role": "user", "content": [{"type": "sound"}]}]})"),
            "sample s8: messages[0].content[0] has no \"text\", \"image\", \"video\" or \"audio\" (type 'sound')");
}

TEST(ChatTest, AMissingOrNonStringRoleIsNamed) {
  EXPECT_EQ(error_of(R"({"messages": [{"content": "x"}]})"),
            R"(messages[0] has no "role" (expected "system", "user", "assistant" or "tool"))");
  EXPECT_EQ(error_of(R"({"messages": [{"role": 5, "content": "x"}]})"),
            "messages[0].role must be a string, got a number");
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

// Issue 31: a number no double holds failed the whole line, and the sample was named by its line.
TEST(SampleIdTest, ReadsTheIdBesideANumberOutOfRange) {
  EXPECT_EQ(sample_id_of(R"({"id": "s1", "weight": 1e999, "messages": []})"), "s1");
  EXPECT_EQ(sample_id_of(R"({"weight": -1e999, "id": 12})"), "12");
  EXPECT_EQ(sample_id_of(R"({"id": 99999999999999999999999, "messages": []})"), std::nullopt);
  EXPECT_EQ(sample_id_of(R"({"weight": 1e999, "id": ""})"), std::nullopt);
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
  const SftSample s = encode_conversation(qwen(), c, ChatTemplate::kQwen2VL, {}, {}, {}).value();
  std::vector<std::int32_t> trained;
  for (std::size_t i = 0; i < s.labels.size(); ++i) {
    if (s.labels[i] != kIgnoreIndex) trained.push_back(s.input_ids[i]);
  }
  EXPECT_EQ(qwen().decode(trained), "yo<|im_end|>\n");
}

// Expected strings are Python's json.dumps(json.loads(input), ensure_ascii=False).
TEST(PythonJsonTest, WritesWhatJsonDumpsWrites) {
  EXPECT_EQ(python_json(R"({"b":[1,2.50,true],"a":null})").value(), R"({"b": [1, 2.5, true], "a": null})");
  EXPECT_EQ(python_json("[1e16, 1.5e16, 1e15, 1e-4, 1e-5, 0.1, -0.0, 5e-324, 1.7976931348623157e308, 1E22, 100.0, "
                        "2.5e-7]")
                .value(),
            "[1e+16, 1.5e+16, 1000000000000000.0, 0.0001, 1e-05, 0.1, -0.0, 5e-324, 1.7976931348623157e+308, "
            "1e+22, 100.0, 2.5e-07]");
  EXPECT_EQ(python_json("[9223372036854775807, -9223372036854775808, 18446744073709551615, 0, -1]").value(),
            "[9223372036854775807, -9223372036854775808, 18446744073709551615, 0, -1]");
  EXPECT_EQ(python_json(R"({"s":"q\"\\\n\r\t\b\f\u0000\u001f\u007f )"
                        "\xc3\xa9\xf0\x9f\x98\x80"
                        R"(\u2028/"})")
                .value(),
            R"({"s": "q\"\\\n\r\t\b\f\u0000\u001f)"
            "\x7f \xc3\xa9\xf0\x9f\x98\x80\xe2\x80\xa8/\"}");
  EXPECT_EQ(python_json(R"({"x":{"y":[{},[],{"z":""}]}})").value(), R"({"x": {"y": [{}, [], {"z": ""}]}})");
  EXPECT_EQ(python_json(R"("\ud83d\ude00")").value(), "\"\xf0\x9f\x98\x80\"");
  EXPECT_FALSE(python_json("{").ok());
}

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(MMFEED_TEMPLATES_DIR "/") + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The build embeds src/text/templates/ (embed_templates.cmake): every byte, the final newline or
// its absence included.
TEST(ChatTemplateTest, EmbedsTheTemplateFilesByteForByte) {
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen2VL), read_fixture("qwen2_vl.jinja"));
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen3VL), read_fixture("qwen3_vl.jinja"));
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen3VLThinking), read_fixture("qwen3_vl_thinking.jinja"));
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen3_5), read_fixture("qwen3_5.jinja"));
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen3_5NoThink), read_fixture("qwen3_5_nothink.jinja"));
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen2_5Omni), read_fixture("qwen2_5_omni.jinja"));
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen3OmniThinking), read_fixture("qwen3_omni_thinking.jinja"));
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen3VL).size(), 5292u);
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen3VLThinking).size(), 5199u);
  EXPECT_EQ(chat_template_text(ChatTemplate::kQwen3OmniThinking).size(), 5715u);
}

TEST(ChatTemplateTest, NamesSelectTemplates) {
  EXPECT_EQ(chat_template("qwen2-vl").value(), ChatTemplate::kQwen2VL);
  EXPECT_EQ(chat_template("qwen2.5-vl").value(), ChatTemplate::kQwen2VL);
  EXPECT_EQ(chat_template("qwen3-vl").value(), ChatTemplate::kQwen3VL);
  EXPECT_EQ(chat_template("qwen3-vl-thinking").value(), ChatTemplate::kQwen3VLThinking);
  EXPECT_EQ(chat_template("qwen2.5-omni").value(), ChatTemplate::kQwen2_5Omni);
  EXPECT_EQ(chat_template("qwen3-omni-thinking").value(), ChatTemplate::kQwen3OmniThinking);
  EXPECT_EQ(chat_template("qwen4-vl").error().code(), ErrorCode::kUnsupported);
}

TEST(ChatTemplateTest, AFileIsAcceptedOnlyByteIdentical) {
  const std::string dir = MMFEED_TEMPLATES_DIR "/";
  EXPECT_EQ(chat_template(dir + "qwen3_vl_thinking.jinja").value(), ChatTemplate::kQwen3VLThinking);
  EXPECT_EQ(chat_template(dir + "qwen3_vl.jinja").value(), ChatTemplate::kQwen3VL);
  const std::string mine = (std::filesystem::temp_directory_path() / "mmfeed_text_test_mine.jinja").string();
  std::ofstream(mine, std::ios::binary) << read_fixture("qwen3_vl.jinja") << "\n";
  const auto refused = chat_template(mine);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(refused.error().message().find("chat template file '" + mine + "' is not byte-identical"),
            std::string::npos)
      << refused.error().message();
  std::filesystem::remove(mine);
}

TEST(ChatTest, ParsesToolsToolCallsAndReasoning) {
  const Conversation c = parse_conversation(R"({"tools": [{"name": "w", "p": 1.50}], "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "thinking": "hmm", "tool_calls": [{"function": {"name": "w", "arguments": {"b": 1, "a": "x"}}},
                                                            {"function": {}, "name": "v", "arguments": "{\"raw\":1}"}]},
      {"role": "tool", "content": "sun"}]})")
                             .value();
  ASSERT_EQ(c.tools.size(), 1u);
  EXPECT_EQ(c.tools[0], R"({"name": "w", "p": 1.5})");
  const Message& a = c.messages[1];
  EXPECT_EQ(a.reasoning_content, std::optional<std::string>("hmm"));
  EXPECT_FALSE(a.has_content());
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].name, "w");
  EXPECT_EQ(a.tool_calls[0].arguments, R"({"b": 1, "a": "x"})");
  EXPECT_EQ(a.tool_calls[1].name, "v");
  EXPECT_EQ(a.tool_calls[1].arguments, R"({"raw":1})");
  EXPECT_EQ(c.messages[2].role, "tool");
}

TEST(ChatTest, ToolCallErrorsNameTheJsonPath) {
  const auto r =
      parse_conversation(R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": null}}]}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "messages[0].tool_calls[0].function.name must be a string (the function's name), got null");
}

TEST(ChatTest, Qwen3ThinkingKeepsReasoningOnlyAfterTheLastQuery) {
  const Conversation c = parse_conversation(R"({"messages": [
      {"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>old</think>A"},
      {"role": "user", "content": "b"}, {"role": "assistant", "content": "", "reasoning_content": "r",
                                         "tool_calls": [{"name": "f", "arguments": {}}]},
      {"role": "tool", "content": "t"}, {"role": "assistant", "content": "\n\nB"}]})")
                             .value();
  const Rendered r = render_chat(c, ChatTemplate::kQwen3VLThinking).value();
  EXPECT_EQ(r.text,
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n"
            "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nt\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nB<|im_end|>\n");
  ASSERT_EQ(r.assistant_think.size(), 3u);
  EXPECT_EQ(r.assistant_think[0].end, r.assistant_think[0].begin);
  EXPECT_EQ(r.text.substr(r.assistant_think[1].begin, r.assistant_think[1].end - r.assistant_think[1].begin),
            "<think>\nr\n</think>\n\n");
  const Rendered instruct = render_chat(c, ChatTemplate::kQwen3VL).value();
  EXPECT_NE(instruct.text.find("<|im_start|>assistant\n<think>old</think>A<|im_end|>"), std::string::npos);
}

TEST(ChatTest, ReasoningIsTrainedByDefaultAndCanBeLeftOut) {
  const Conversation c = parse_conversation(R"({"messages": [{"role": "user", "content": "q"},
                                          {"role": "assistant", "content": "yes", "reasoning_content": "why"}]})")
                             .value();
  auto trained_text = [&](bool train_reasoning) {
    SftOptions o;
    o.train_reasoning = train_reasoning;
    const SftSample s = encode_conversation(qwen(), c, ChatTemplate::kQwen3VLThinking, {}, {}, {}, o).value();
    std::vector<std::int32_t> trained;
    for (const std::int32_t id : s.labels) {
      if (id != kIgnoreIndex) trained.push_back(id);
    }
    return qwen().decode(trained);
  };
  EXPECT_EQ(trained_text(true), "<think>\nwhy\n</think>\n\nyes<|im_end|>\n");
  EXPECT_EQ(trained_text(false), "yes<|im_end|>\n");
}

// qwen-vl-utils sizes an image by these keys; mmfeed sizes every image by the loader's bounds,
// so a sample that asks otherwise is refused by key and sample, where it was silently ignored.
TEST(ChatTest, Issue31PerImageSizeKeysAreRefusedByName) {
  for (const char* key : {"min_pixels", "max_pixels", "resized_height", "resized_width"}) {
    for (const std::string& item : {R"({"type": "image", "image": "a.jpg", ")" + std::string(key) + R"(": 50176})",
                                    R"({"image_url": {"url": "a.jpg"}, ")" + std::string(key) + R"(": 50176})"}) {
      const auto r = parse_conversation(R"({"id": "s7", "messages": [{"role": "user", "content": [{"text": "q"}, )" +
                                        item + "]}]}");
      ASSERT_FALSE(r.ok()) << item;
      EXPECT_EQ(r.error().code(), ErrorCode::kUnsupported);
      EXPECT_EQ(r.error().context(), "sample s7");
      EXPECT_EQ(r.error().message().rfind(
                    "messages[0].content[1]." + std::string(key) + ": per-image sizes are not supported", 0),
                0u)
          << r.error().message();
    }
  }
  EXPECT_TRUE(
      parse_conversation(R"({"messages": [{"role": "user", "content": [{"image": "a.jpg", "max_pixels": null}]}]})")
          .ok());
}

TEST(ChatTest, MediaTheTemplateDoesNotPrintAreRefusedWhenEncoding) {
  const Conversation c = parse_conversation(R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "image", "image": "a.jpg"}, {"type": "text", "text": "x"}]}]})")
                             .value();
  const std::vector<Grid3> grids = {{1, 4, 4}};
  const auto r = encode_conversation(qwen(), c, ChatTemplate::kQwen3VL, grids, {}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message().rfind("the Qwen3-VL Instruct template renders 0 of the conversation's 1 images", 0), 0u)
      << r.error().message();
  EXPECT_TRUE(encode_conversation(qwen(), c, ChatTemplate::kQwen3VLThinking, grids, {}, {}).ok());
}

// The rendering of `json` with Qwen2-VL's and Qwen3-VL's templates, and its images in order:
// two samples normalised to the same conversation render alike.
std::string rendered(std::string_view json) {
  auto c = parse_conversation(json);
  if (!c.ok()) return "error: " + c.error().to_string();
  std::string out;
  for (ChatTemplate t : {ChatTemplate::kQwen2VL, ChatTemplate::kQwen3VL}) {
    auto r = render_chat(*c, t, {});
    out += r.ok() ? r->text : "error: " + r.error().to_string();
  }
  for (const std::string& uri : c->media(ContentItem::Type::kImage)) out += "|image " + uri;
  for (const std::string& uri : c->media(ContentItem::Type::kVideo)) out += "|video " + uri;
  return out;
}

// Issue 33: LLaMA-Factory's and ms-swift's messages with <image> tags lost every image, and the
// tags were tokenized as text.
TEST(ChatTest, Issue33MessagesPlaceListedMediaAtTheirTags) {
  EXPECT_EQ(rendered(R"({"messages": [{"role": "user", "content": "<image>Who? <video>and <image>"},
                                      {"role": "assistant", "content": "Them."}],
                         "images": ["a.jpg", "b.jpg"], "videos": ["v.mp4"]})"),
            rendered(R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"},
                                                                   {"type": "text", "text": "Who? "},
                                                                   {"type": "video", "video": "v.mp4"},
                                                                   {"type": "text", "text": "and "},
                                                                   {"type": "image", "image": "b.jpg"}]},
                                      {"role": "assistant", "content": "Them."}]})"));
  EXPECT_NE(rendered(R"({"messages": [{"role": "user", "content": "<image>Who?"}], "images": ["a.jpg"]})")
                .find("|image a.jpg"),
            std::string::npos);
}

// Issue 33: TRL's and transformers' processor format, as Parquet rows hold it: {"type": "image"}
// items (every key present, null where unused) take the sample's listed images in order.
TEST(ChatTest, Issue33TypedItemsWithoutAUriTakeTheListedMedia) {
  EXPECT_EQ(rendered(R"({"messages": [{"role": "user", "content": [{"type": "image", "text": null, "index": 0},
                                                                   {"type": "text", "text": "Who? ", "index": null},
                                                                   {"type": "video", "text": null, "video": null},
                                                                   {"type": "image", "text": null, "image": null}]},
                                      {"role": "assistant", "content": [{"type": "text", "text": "Them.", "image": null}]}],
                         "images": ["a.jpg", "b.jpg"], "videos": ["v.mp4"]})"),
            rendered(R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"},
                                                                   {"type": "text", "text": "Who? "},
                                                                   {"type": "video", "video": "v.mp4"},
                                                                   {"type": "image", "image": "b.jpg"}]},
                                      {"role": "assistant", "content": [{"type": "text", "text": "Them."}]}]})"));
  EXPECT_EQ(
      error_of(R"({"messages": [{"role": "user", "content": [{"type": "image"}]}], "images": ["a.jpg", "b.jpg"]})"),
      "2 images listed but 1 <image> placeholders");
}

TEST(ChatTest, Issue33ListedMediaMustEachBePlacedOnce) {
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "Who?"}], "images": ["a.jpg"]})"),
            "1 images listed but 0 <image> placeholders");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "<image><image>"}], "images": ["a.jpg"]})"),
            "messages[0].content: more <image> placeholders than images listed");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "<video>"}]}],
                         "images": ["a.jpg"]})"),
            "messages[0].content[0].text: more <video> placeholders than videos listed");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "hi"}], "audios": ["a.wav"]})"),
            "1 audios listed but 0 <audio> placeholders");
}

TEST(ChatTest, AudioItemsAndListedAudioParseInOrderWithTheirCrops) {
  const auto c = parse_conversation(R"({"messages": [
      {"role": "user", "content": "<audio>What is said?<image>"},
      {"role": "assistant", "content": "Hello."},
      {"role": "user", "content": [{"type": "audio", "audio": "s3://b/c.flac", "audio_start": 1.5, "audio_end": null},
                                   {"type": "audio", "audio_url": "d.mp3"}, {"type": "audio"}]}],
      "audios": ["a.wav", "b.wav"], "images": ["i.jpg"]})");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->media(ContentItem::Type::kAudio),
            (std::vector<std::string>{"a.wav", "s3://b/c.flac", "d.mp3", "b.wav"}));
  EXPECT_EQ(c->media(ContentItem::Type::kImage), (std::vector<std::string>{"i.jpg"}));
  const ContentItem& cropped = c->messages[2].content[0];
  EXPECT_EQ(cropped.audio.audio_start, 1.5);
  EXPECT_FALSE(cropped.audio.audio_end.has_value());
}

TEST(ChatTest, OnlyTheOmniTemplatesRenderAudio) {
  const auto c = parse_conversation(R"({"messages": [{"role": "user", "content": [{"type": "audio", "audio": "a.wav"},
                                                                               {"type": "text", "text": "Hi"}]}]})");
  ASSERT_TRUE(c.ok());
  const auto vl = render_chat(*c, ChatTemplate::kQwen2VL, {});
  ASSERT_FALSE(vl.ok());
  EXPECT_EQ(vl.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(vl.error().message().find("renders no audio"), std::string::npos);
  RenderOptions o;
  o.add_audio_id = true;
  const auto omni = render_chat(*c, ChatTemplate::kQwen2_5Omni, o);
  ASSERT_TRUE(omni.ok()) << omni.error().message();
  EXPECT_EQ(omni->text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nAudio 1: "
            "<|audio_bos|><|AUDIO|><|audio_eos|>Hi<|im_end|>\n");
}

TEST(ChatTest, Qwen3OmniThinkingWritesAListSystemPromptTurnByTurnAndSkipsUntypedText) {
  const auto c = parse_conversation(R"({"messages": [
      {"role": "system", "content": [{"type": "text", "text": "Listen."}, {"text": "skipped"},
                                     {"type": "audio", "audio": "s.wav"}]},
      {"role": "user", "content": [{"type": "audio", "audio": "a.wav"}, {"type": "note", "text": "skipped"},
                                   {"type": "text", "text": "Hi"}]},
      {"role": "assistant", "content": "Yo", "reasoning_content": "r"}]})");
  ASSERT_TRUE(c.ok()) << c.error().message();
  RenderOptions o;
  o.add_audio_id = o.add_vision_id = true;  // the template numbers nothing
  o.add_generation_prompt = true;
  o.enable_thinking = false;
  const auto r = render_chat(*c, ChatTemplate::kQwen3OmniThinking, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  // The list-form user turn is no query, so the answer after it keeps no think block.
  EXPECT_EQ(r->text,
            "<|im_start|>system\nListen.<|im_end|>\n<|im_start|>system\n<|audio_start|><|audio_pad|><|audio_end|>"
            "<|im_end|>\n<|im_start|>user\n<|audio_start|><|audio_pad|><|audio_end|>Hi<|im_end|>\n"
            "<|im_start|>assistant\nYo<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  Conversation with_tools = *c;
  with_tools.tools.push_back(R"({"name": "f"})");
  const auto refused = render_chat(with_tools, ChatTemplate::kQwen3OmniThinking, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("content must be a string"), std::string::npos);
}

// encode_conversation finds each medium by media_tokens: what every template renders spells them.
TEST(ChatTest, EachTemplateRendersItsMediaTokens) {
  const auto c = parse_conversation(R"({"messages": [{"role": "user", "content": [
      {"type": "image", "image": "i.jpg"}, {"type": "video", "video": "v.mp4"}, {"type": "audio", "audio": "a.wav"},
      {"type": "text", "text": "Hi"}]}]})");
  ASSERT_TRUE(c.ok()) << c.error().message();
  Conversation without_audio = *c;
  without_audio.messages[0].content.erase(without_audio.messages[0].content.begin() + 2);
  for (const ChatTemplate tmpl :
       {ChatTemplate::kQwen2VL, ChatTemplate::kQwen3VL, ChatTemplate::kQwen3VLThinking, ChatTemplate::kQwen3_5,
        ChatTemplate::kQwen3_5NoThink, ChatTemplate::kQwen2_5Omni, ChatTemplate::kQwen3OmniThinking}) {
    const MediaTokens& m = media_tokens(tmpl);
    const auto r = render_chat(takes_audio(tmpl) ? *c : without_audio, tmpl, {});
    ASSERT_TRUE(r.ok()) << r.error().message();
    std::string blocks = std::string(m.vision_start) + std::string(m.image_pad) + std::string(m.vision_end) +
                         std::string(m.vision_start) + std::string(m.video_pad) + std::string(m.vision_end);
    if (takes_audio(tmpl)) blocks += std::string(m.audio_start) + std::string(m.audio_pad) + std::string(m.audio_end);
    EXPECT_NE(r->text.find(blocks + "Hi"), std::string::npos) << chat_template_name(tmpl) << ": " << r->text;
    EXPECT_EQ(m.audio_pad.empty(), !takes_audio(tmpl));
  }
}

TEST(ChatTest, Issue33TheSystemKeyIsTheFirstMessage) {
  EXPECT_EQ(rendered(R"({"system": "Be brief.", "conversations": [{"from": "human", "value": "<image>hi"},
                                                                   {"from": "gpt", "value": "yo"}],
                         "images": ["a.jpg"]})"),
            rendered(R"({"messages": [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": [{"type": "image", "image": "a.jpg"}, {"type": "text", "text": "hi"}]},
                                      {"role": "assistant", "content": "yo"}]})"));
  EXPECT_EQ(rendered(R"({"system": "", "messages": [{"role": "user", "content": "hi"}]})"),
            rendered(R"({"messages": [{"role": "user", "content": "hi"}]})"));
  EXPECT_EQ(
      error_of(
          R"({"system": "a", "messages": [{"role": "system", "content": "b"}, {"role": "user", "content": "c"}]})"),
      "the sample has both a \"system\" key and a system message; keep one");
}

TEST(ChatTest, Issue33ToolsAndCallsWrittenAsJsonTextReadAsTheirValues) {
  const std::string expected = rendered(R"({"tools": [{"name": "w", "parameters": {}}], "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "tool_calls": [{"name": "w", "arguments": {"city": "Oslo"}}, {"name": "w", "arguments": {}}]},
      {"role": "tool", "content": "sun"}, {"role": "assistant", "content": "Sunny."}]})");
  ASSERT_EQ(expected.find("error"), std::string::npos) << expected;
  // ms-swift: tools as JSON text, each call a "tool_call" turn, results "tool_response".
  EXPECT_EQ(rendered(R"({"tools": "[{\"name\": \"w\", \"parameters\": {}}]", "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "tool_call", "content": "{\"name\": \"w\", \"arguments\": {\"city\": \"Oslo\"}}"},
      {"role": "tool_call", "content": "{\"name\": \"w\", \"arguments\": {}}"},
      {"role": "tool_response", "content": "sun"}, {"role": "assistant", "content": "Sunny."}]})"),
            expected);
  // LLaMA-Factory: a "function_call" turn holding the calls.
  EXPECT_EQ(rendered(R"({"tools": "[{\"name\": \"w\", \"parameters\": {}}]", "conversations": [
      {"from": "human", "value": "weather?"},
      {"from": "function_call", "value": "[{\"name\": \"w\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"w\", \"arguments\": {}}]"},
      {"from": "observation", "value": "sun"}, {"from": "gpt", "value": "Sunny."}]})"),
            expected);
  EXPECT_EQ(error_of(R"({"tools": "[{", "messages": [{"role": "user", "content": "hi"}]})").substr(0, 28),
            "tools holds malformed JSON: ");
  EXPECT_EQ(error_of(R"({"conversations": [{"from": "function_call", "value": "5"}]})"),
            "conversations[0].value must be a list of tool calls, got a number");
}

}  // namespace
}  // namespace mmfeed::text
