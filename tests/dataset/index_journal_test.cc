// The index build's journal (dataset/index_journal.h): chunks appended are read back whole into
// the records and media they were written from; a chunk cut anywhere, or damaged, is dropped with
// what follows it (the file cut back to the last whole one, then appended to); a journal of
// another key, or a file that is no journal, is started anew; a chunk claiming more samples than
// the build holds is dropped, never read past its bytes.
#include "dataset/index_journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mmfeed::dataset {
namespace {

namespace fs = std::filesystem;

class IndexJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mmfeed-journal-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "x.mmidx.journal").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A build of `n` samples, sample i naming i % 3 images of width i.
  static DatasetIndex sized(std::uint64_t n) {
    DatasetIndex index;
    index.records.assign(n, {});
    return index;
  }
  static void describe(DatasetIndex& index, std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t i = first; i < end; ++i) {
      IndexRecord& r = index.records[i];
      r.offset = 100 * i;
      r.number = i + 1;
      r.length = 90;
      r.first_media = index.media.size();
      r.images = static_cast<std::uint16_t>(i % 3);
      for (std::uint16_t k = 0; k < r.images; ++k) {
        index.media.push_back(
            MediaFacts{.known = MediaFacts::Known::kRead, .width = static_cast<std::uint32_t>(i), .height = k});
      }
    }
  }
  // Chunks of 4 of a 10-sample build appended; the chunk counts name one unreadable medium each.
  void write_three_chunks() {
    DatasetIndex index = sized(10);
    ChunkCounts none;
    auto journal = IndexJournal::open(path_, "key-1", index, none);
    ASSERT_TRUE(journal.ok()) << journal.error().to_string();
    for (std::uint64_t first = 0; first < 10; first += 4) {
      const std::uint64_t media = index.media.size(), end = std::min<std::uint64_t>(10, first + 4);
      describe(index, first, end);
      ASSERT_TRUE(journal->append(index, first, end, media, {1, 0, {"m" + std::to_string(first)}}).ok());
    }
  }
  std::uint64_t resumed(const std::string& key, DatasetIndex& index, ChunkCounts& counts) {
    auto journal = IndexJournal::open(path_, key, index, counts);
    EXPECT_TRUE(journal.ok());
    return journal.ok() ? journal->resumed() : 0;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(IndexJournalTest, ChunksAreReadBackAsWritten) {
  write_three_chunks();
  DatasetIndex want = sized(10);
  describe(want, 0, 10);
  DatasetIndex got = sized(10);
  ChunkCounts counts;
  EXPECT_EQ(resumed("key-1", got, counts), 10u);
  ASSERT_EQ(got.media.size(), want.media.size());
  for (std::size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(got.records[i].offset, want.records[i].offset);
    EXPECT_EQ(got.records[i].first_media, want.records[i].first_media);
    EXPECT_EQ(got.records[i].images, want.records[i].images);
  }
  for (std::size_t j = 0; j < want.media.size(); ++j) EXPECT_EQ(got.media[j].width, want.media[j].width);
  EXPECT_EQ(counts.unreadable, 3u);
  EXPECT_EQ(counts.named, (std::vector<std::string>{"m0", "m4", "m8"}));
}

TEST_F(IndexJournalTest, ACutChunkIsDroppedAndTheFileCutBackToTheWholeOnes) {
  write_three_chunks();
  const auto whole = fs::file_size(path_);
  for (const std::uintmax_t cut : {whole - 1, whole - 40, whole - 160}) {
    write_three_chunks();
    fs::resize_file(path_, cut);
    DatasetIndex index = sized(10);
    ChunkCounts counts;
    const std::uint64_t taken = resumed("key-1", index, counts);
    EXPECT_EQ(taken, 8u) << cut;  // the third chunk (samples 8-9) lost
    EXPECT_EQ(counts.named.size(), 2u);
    EXPECT_LT(fs::file_size(path_), cut);  // what followed the second chunk cut away
  }
}

TEST_F(IndexJournalTest, ADamagedChunkDropsItAndWhatFollows) {
  write_three_chunks();
  std::string bytes;
  {
    std::ifstream in(path_, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x40;  // inside the second chunk
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  DatasetIndex index = sized(10);
  ChunkCounts counts;
  EXPECT_EQ(resumed("key-1", index, counts), 4u);
}

TEST_F(IndexJournalTest, AnotherKeyOrNoJournalStartsAnew) {
  write_three_chunks();
  DatasetIndex index = sized(10);
  ChunkCounts counts;
  EXPECT_EQ(resumed("key-2", index, counts), 0u);
  EXPECT_TRUE(index.media.empty());
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << "not a journal at all";
  EXPECT_EQ(resumed("key-1", index, counts), 0u);
}

TEST_F(IndexJournalTest, AChunkOfMoreSamplesThanTheBuildHoldsIsDropped) {
  write_three_chunks();
  DatasetIndex index = sized(6);  // a journal of 10 samples met by a build of 6 (a key would differ)
  ChunkCounts counts;
  EXPECT_EQ(resumed("key-1", index, counts), 4u);  // the second chunk would run past sample 6
  EXPECT_EQ(index.records.size(), 6u);
}

}  // namespace
}  // namespace mmfeed::dataset
