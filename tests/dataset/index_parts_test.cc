// A manifest's index built in parts (include/mmfeed/index.h: plan_index_parts, describe_index_part,
// IndexOptions::parts): whatever bytes the text is cut at, the parts make the index a whole build
// makes, byte for byte, and its summary (media that could not be read named at their own lines);
// parts that do not fit (another version of the source, other options, missing, out of order,
// damaged) are refused by name; a JSON array is described whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mmfeed/index.h"

namespace mmfeed {
namespace {

namespace fs = std::filesystem;

class IndexPartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mmfeed-index-parts-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const fs::path corpus = fs::path(MMFEED_TEST_DATA_DIR) / "corpus";
    fs::copy_file(corpus / "decode/exif6.jpg", dir_ / "a.jpg");
    fs::copy_file(corpus / "decode/rgb.png", dir_ / "b.png");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static std::string sample(const std::string& image, const std::string& words) {
    return R"({"messages": [{"role": "user", "content": [{"type": "image", "image": ")" + image +
           R"("}, {"type": "text", "text": ")" + words + R"("}]}, {"role": "assistant", "content": "A."}]})";
  }
  // A BOM, blank lines, a sample that is no conversation, an unreadable and a missing image,
  // lines of many lengths.
  std::string manifest() {
    std::string text = "\xEF\xBB\xBF" + sample("a.jpg", "What?") + "\n\n";
    text += sample("b.png", std::string(300, 'x')) + "\n";
    text += "{\"not\": \"a conversation\"}\n";
    text += sample("missing.png", "Where?") + "\n  \n";
    text += sample("a.jpg", "Again") + "\n";
    text += sample("b.png", "Last, no newline");
    return write("train.jsonl", text);
  }

  // The index built from `ranges`' parts, written to `out`; its summary.
  static Result<IndexSummary> build_from(const std::string& source, const std::vector<IndexPartRange>& ranges,
                                         IndexOptions options, const std::string& out) {
    for (const IndexPartRange& r : ranges) {
      MMFEED_ASSIGN_OR_RETURN(std::string part, describe_index_part(source, r, options));
      options.parts.push_back(std::move(part));
    }
    options.out = out;
    return build_index(source, options);
  }

  IndexOptions out_to(const std::string& name) const {
    IndexOptions options;
    options.out = (dir_ / name).string();
    return options;
  }

  fs::path dir_;
};

TEST_F(IndexPartsTest, PartsCutAnywhereMakeTheWholeBuildsIndex) {
  const std::string source = manifest();
  const IndexSummary whole = build_index(source, out_to("whole.mmidx")).value();
  ASSERT_EQ(whole.bad_count, 1u);
  ASSERT_EQ(whole.unreadable.size(), 1u);
  EXPECT_NE(whole.unreadable[0].find("train.jsonl:5: missing.png"), std::string::npos) << whole.unreadable[0];
  const std::string expected = read(whole.path);
  const std::uint64_t text = fs::file_size(source) - 3;
  const std::string out = (dir_ / "parts.mmidx").string();
  for (std::uint64_t cut = 0; cut <= text; ++cut) {  // two parts, cut at every byte
    const IndexSummary s = build_from(source, {{0, cut}, {cut, text}}, {}, out).value();
    ASSERT_EQ(read(out), expected) << "cut at " << cut;
    EXPECT_EQ(s.unreadable, whole.unreadable) << "cut at " << cut;
    EXPECT_EQ(s.bad, whole.bad);
    EXPECT_EQ(s.samples, whole.samples);
  }
  for (const std::vector<IndexPartRange>& ranges :
       std::vector<std::vector<IndexPartRange>>{{{0, text}},
                                                {{0, 1}, {1, 2}, {2, 500}, {500, 501}, {501, text}},
                                                {{0, 0}, {0, 90}, {90, 90}, {90, 400}, {400, 700}, {700, text}}}) {
    build_from(source, ranges, {}, out).value();
    EXPECT_EQ(read(out), expected);
  }
}

TEST_F(IndexPartsTest, TextTokensAndOptionsAreThoseOfTheParts) {
  const std::string source = manifest();
  IndexOptions options;
  options.tokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
  options.probe_media = false;
  options.out = (dir_ / "whole.mmidx").string();
  const IndexSummary whole = build_index(source, options).value();
  ASSERT_GT(whole.text_tokens, 0u);
  const std::uint64_t text = fs::file_size(source) - 3;
  const IndexSummary s = build_from(source, {{0, 333}, {333, text}}, options, (dir_ / "parts.mmidx").string()).value();
  EXPECT_EQ(read(s.path), read(whole.path));
  EXPECT_EQ(s.text_tokens, whole.text_tokens);
}

TEST_F(IndexPartsTest, PartsThatDoNotFitAreRefusedByName) {
  const std::string source = manifest();
  const std::uint64_t text = fs::file_size(source) - 3;
  const std::string a = describe_index_part(source, {0, 400}, {}).value();
  const std::string b = describe_index_part(source, {400, text}, {}).value();
  const auto refused = [&](std::vector<std::string> parts, IndexOptions options = {}) {
    options.parts = std::move(parts);
    options.out = (dir_ / "x.mmidx").string();
    auto r = build_index(source, options);
    EXPECT_FALSE(fs::exists(options.out));
    return r.ok() ? std::string("built") : r.error().to_string();
  };
  EXPECT_NE(refused({a}).find("parts are missing"), std::string::npos) << refused({a});
  EXPECT_NE(refused({b, a}).find("index part 1 of 2"), std::string::npos) << refused({b, a});
  EXPECT_NE(refused({a, a}).find("does not follow on"), std::string::npos) << refused({a, a});
  std::string damaged = b;
  damaged[damaged.size() / 2] ^= 0x20;
  EXPECT_NE(refused({a, damaged}).find("index part 2 of 2"), std::string::npos);
  EXPECT_NE(refused({a, damaged}).find("CRC-32"), std::string::npos);
  EXPECT_NE(refused({a, b.substr(0, 40)}).find("truncated"), std::string::npos);
  IndexOptions rooted, unprobed;
  rooted.media_root = dir_.string();
  unprobed.probe_media = false;
  EXPECT_NE(refused({a, b}, rooted).find("other options"), std::string::npos);
  EXPECT_NE(refused({a, b}, unprobed).find("other options"), std::string::npos);
  // The source rewritten after its parts were described (another size).
  write("train.jsonl", read(source) + "\n" + sample("a.jpg", "One more"));
  EXPECT_NE(refused({a, b}).find("another version of the source"), std::string::npos) << refused({a, b});
  EXPECT_EQ(describe_index_part(source, {5, 1 << 20}, {}).error().code(), ErrorCode::kInvalidArgument);
}

TEST_F(IndexPartsTest, AJsonArrayIsDescribedWhole) {
  const std::string source = write("train.json", "[" + sample("a.jpg", "One") + ",\n " + sample("b.png", "Two") + "]");
  const std::vector<IndexPartRange> plan = plan_index_parts(source, 8).value();
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].end, fs::file_size(source));
  const IndexSummary whole = build_index(source, out_to("whole.mmidx")).value();
  EXPECT_EQ(read(build_from(source, plan, {}, (dir_ / "parts.mmidx").string()).value().path), read(whole.path));
  EXPECT_EQ(describe_index_part(source, {0, 50}, {}).error().code(), ErrorCode::kUnsupported);
}

TEST_F(IndexPartsTest, APlanTilesTheTextInPartsOfAtLeastAMebibyte) {
  std::string text;
  while (text.size() < (std::size_t{3} << 20) + 100) text += sample("a.jpg", "Filler") + "\n";
  const std::string source = write("big.jsonl", text);
  const std::vector<IndexPartRange> plan = plan_index_parts(source, 64).value();
  ASSERT_EQ(plan.size(), 3u);
  std::uint64_t next = 0;
  for (const IndexPartRange& r : plan) {
    EXPECT_EQ(r.begin, next);
    EXPECT_GE(r.end - r.begin, std::uint64_t{1} << 20);
    next = r.end;
  }
  EXPECT_EQ(next, text.size());
  EXPECT_EQ(plan_index_parts(source, 1).value().size(), 1u);
  const std::string gz = write("train.jsonl.gz", std::string("\x1f\x8b\x08\x00", 4) + "rest");
  EXPECT_EQ(plan_index_parts(gz, 4).error().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(plan_index_parts((dir_ / "none.jsonl").string(), 4).error().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace mmfeed
