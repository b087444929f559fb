// A remote manifest's text read by byte range (dataset/indexed_text.h) against a real nginx
// (tests/storage/nginx_server.h): each sample's line exact, ranges adjacent in the file one GET,
// nothing fetched twice, and a version other than the one indexed (If-Match) or a range past the
// object's end an error naming the manifest, never a crash. Several files' texts laid end to end
// (SegmentedText, a Parquet source's) read each sample from the text holding it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../storage/nginx_server.h"
#include "dataset/index.h"
#include "dataset/indexed_text.h"

namespace mmfeed::dataset {
namespace {

namespace fs = std::filesystem;

class RemoteTextTest : public storage::testing::NginxSuite<RemoteTextTest> {
 public:
  static constexpr const char* kName = "mmfeed-remote-text";

  static void write_objects(const fs::path& objects) {
    std::ofstream(objects / "train.jsonl", std::ios::binary) << text();
  }

 protected:
  // 100 lines of different lengths; line i at ranges()[i].
  static const std::string& text() {
    static const std::string t = [] {
      std::string out;
      for (int i = 0; i < 100; ++i)
        out += "{\"id\": \"" + std::to_string(i) + "\", \"pad\": \"" + std::string(i * 7 % 50, 'x') + "\"}\n";
      return out;
    }();
    return t;
  }
  static std::vector<TextRange> ranges() {
    std::vector<TextRange> out;
    for (std::size_t at = 0; at < text().size();) {
      const std::size_t end = text().find('\n', at);
      out.push_back({at, static_cast<std::uint32_t>(end - at)});
      at = end + 1;
    }
    return out;
  }
  static std::string url() { return server_->url("ok", "train.jsonl"); }

  static RemoteText open(const std::string& etag) {
    return RemoteText(storage::parse_uri(url()).value(), url(), etag, 0, text().size(), {}, 1 << 20);
  }
};

TEST_F(RemoteTextTest, ItsStampIsTheObjectsSizeAndEtag) {
  const SourceStamp stamp = stamp_source(url(), {}).value();
  EXPECT_EQ(stamp.size, text().size());
  EXPECT_FALSE(stamp.etag.empty());
  EXPECT_NE(stamp.etag_crc, 0u);
  EXPECT_EQ(stamp.head, text().substr(0, 4));
  EXPECT_EQ(stamp_source(server_->url("ok", "missing.jsonl"), {}).error().code(), ErrorCode::kNotFound);
}

TEST_F(RemoteTextTest, LinesAskedForAheadArriveExactAdjacentOnesInOneGet) {
  const RemoteText remote = open(stamp_source(url(), {}).value().etag);
  const std::vector<TextRange> all = ranges();
  // Lines 3, 4 and 5 lie side by side (a line break apart): one GET; 40 and 90 one each. Line 40
  // asked for twice (a sample drawn twice) is read twice, fetched once.
  const std::vector<TextRange> ahead{all[90], all[4], all[40], all[3], all[5], all[40]};
  remote.prefetch(ahead);
  std::string buffer;
  for (const TextRange& r : ahead) {
    auto line = remote.read(r, buffer);
    ASSERT_TRUE(line.ok()) << line.error().to_string();
    EXPECT_EQ(*line, text().substr(r.offset, r.length));
  }
  EXPECT_EQ(remote.reads().requests, 3u);
  EXPECT_EQ(remote.reads().bytes, all[5].offset + all[5].length - all[3].offset + all[40].length + all[90].length);
  // Not asked for ahead (or read already): fetched when read.
  auto again = remote.read(all[40], buffer);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(*again, text().substr(all[40].offset, all[40].length));
  EXPECT_EQ(remote.reads().requests, 4u);
}

TEST_F(RemoteTextTest, AnotherVersionOrARangePastItsEndIsTheSamplesErrorNamingIt) {
  const RemoteText replaced = open("\"another-version\"");
  std::string buffer;
  replaced.prefetch(ranges());
  for (const TextRange& r : ranges()) {
    auto line = replaced.read(r, buffer);
    ASSERT_FALSE(line.ok());
    EXPECT_EQ(line.error().code(), ErrorCode::kUnavailable);
    EXPECT_EQ(line.error().to_string().rfind(url() + ": replaced since it was indexed", 0), 0u)
        << line.error().to_string();
  }
  const RemoteText cut = open(stamp_source(url(), {}).value().etag);
  auto past = cut.read({text().size() + 10, 20}, buffer);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.error().to_string().find(url()), std::string::npos) << past.error().to_string();
}

TEST(SegmentedTextTest, EachSampleIsReadFromTheTextHoldingIt) {
  std::vector<std::shared_ptr<const IndexedText>> texts{std::make_shared<MemoryText>("a", "first\nrow\n"),
                                                        std::make_shared<MemoryText>("b", ""),
                                                        std::make_shared<MemoryText>("c", "second\n")};
  const SegmentedText text("train-*.parquet", texts);
  EXPECT_EQ(text.size(), 17u);
  std::string buffer;
  EXPECT_EQ(text.read({6, 3}, buffer).value(), "row");
  EXPECT_EQ(text.read({10, 6}, buffer).value(), "second");
  EXPECT_EQ(text.read({0, 5}, buffer).value(), "first");
  const auto across = text.read({8, 4}, buffer);  // "w\ns" spans two files' text
  ASSERT_FALSE(across.ok());
  EXPECT_NE(across.error().to_string().find("train-*.parquet"), std::string::npos);
  EXPECT_FALSE(text.read({17, 1}, buffer).ok());
}

}  // namespace
}  // namespace mmfeed::dataset
