// source_files.h: globs matched within a path component, folders resolved to one layout.
#include "dataset/source_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace mmfeed::dataset {
namespace {

namespace fs = std::filesystem;

TEST(GlobMatch, StarAndQuestionStayWithinAComponent) {
  EXPECT_TRUE(glob_match("train-*.parquet", "train-00000-of-00002.parquet"));
  EXPECT_TRUE(glob_match("d/*/x.tar", "d/a/x.tar"));
  EXPECT_FALSE(glob_match("d/*.tar", "d/a/x.tar"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_FALSE(glob_match("a?c", "a/c"));
  EXPECT_TRUE(glob_match("*a*b*", "xxaYYbZ"));
  EXPECT_FALSE(glob_match("*a*b", "xxaYYbZ"));
  EXPECT_TRUE(glob_match("**", ""));
}

TEST(HasWildcard, AnHttpQueryIsNoGlob) {
  EXPECT_TRUE(has_wildcard("data/*.jsonl"));
  EXPECT_TRUE(has_wildcard("s3://b/p?.tar"));
  EXPECT_FALSE(has_wildcard("https://h/m.jsonl?X-Amz-Signature=ab"));
  EXPECT_TRUE(has_wildcard("https://h/*.jsonl?x=1"));
}

class SourceFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mmfeed-source-files-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void touch(const fs::path& p) { std::ofstream(dir_ / p) << "x"; }
  fs::path dir_;
};

TEST_F(SourceFilesTest, AFolderGivesItsDataFilesInOrder) {
  touch("data/train-00001-of-00002.parquet");
  touch("data/train-00000-of-00002.parquet");
  touch("README.md");
  auto f = source_files(dir_.string(), {});
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(f->layout, Layout::kParquet);
  ASSERT_EQ(f->files.size(), 2u);
  EXPECT_TRUE(f->files[0].ends_with("train-00000-of-00002.parquet"));
}

TEST_F(SourceFilesTest, AGlobMatchingNothingIsNamed) {
  auto f = source_files((dir_ / "data" / "*.tar").string(), {});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().code(), ErrorCode::kNotFound);
}

TEST_F(SourceFilesTest, AFileNamesItsLayout) {
  auto f = source_files("shard-{0..2}.tar", {});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->layout, Layout::kShards);
  EXPECT_EQ(f->files.size(), 3u);
  EXPECT_EQ(source_files("train.jsonl.gz", {})->layout, Layout::kManifest);
}

}  // namespace
}  // namespace mmfeed::dataset
