// Parquet sources (dataset/parquet.h): files written here with Arrow's own writer (the layouts
// asked for: a page index or none, dictionary pages or PLAIN, one image or a list per row), read
// into rows and cells, each cell decoded from exactly the byte range its sample fetches.
#include "dataset/parquet.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace mmfeed::dataset {
namespace {

constexpr std::uint64_t kMaxBytes = 64 << 20;  // what a cell's pages may decode to

// Image bytes of row r, element e: distinct, of varied sizes.
std::string image_bytes(int r, int e) {
  return std::string(300 + 97 * r + 13 * e, static_cast<char>('a' + (r + e) % 26));
}

class ParquetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-parquet-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `rows` rows: an id, a text column, and "images": a list of (r % 3) Image() structs.
  std::string write(const std::string& name, int rows, const parquet::WriterProperties& props) {
    auto image = arrow::struct_({arrow::field("bytes", arrow::binary()), arrow::field("path", arrow::utf8())});
    arrow::StringBuilder ids, texts;
    auto bytes = std::make_shared<arrow::BinaryBuilder>();
    auto paths = std::make_shared<arrow::StringBuilder>();
    auto structs = std::make_shared<arrow::StructBuilder>(
        image, arrow::default_memory_pool(), std::vector<std::shared_ptr<arrow::ArrayBuilder>>{bytes, paths});
    arrow::ListBuilder lists(arrow::default_memory_pool(), structs, arrow::list(image));
    for (int r = 0; r < rows; ++r) {
      EXPECT_TRUE(ids.Append("s" + std::to_string(r)).ok());
      EXPECT_TRUE(texts.Append("say \"" + std::to_string(r) + "\"\n" + std::string(r >= 12 ? 20000 : 0, '.')).ok());
      EXPECT_TRUE(lists.Append().ok());
      for (int e = 0; e < r % 3; ++e) {
        EXPECT_TRUE(structs->Append().ok());
        EXPECT_TRUE(bytes->Append(image_bytes(r, e)).ok());
        EXPECT_TRUE(paths->AppendNull().ok());
      }
    }
    std::shared_ptr<arrow::Array> id, text, list;
    EXPECT_TRUE(ids.Finish(&id).ok());
    EXPECT_TRUE(texts.Finish(&text).ok());
    EXPECT_TRUE(lists.Finish(&list).ok());
    auto schema = arrow::schema({arrow::field("id", arrow::utf8()), arrow::field("text", arrow::utf8()),
                                 arrow::field("images", arrow::list(image))});
    auto table = arrow::Table::Make(schema, {id, text, list});
    const std::string path = (dir_ / name).string();
    auto out = arrow::io::FileOutputStream::Open(path);
    EXPECT_TRUE(out.ok());
    EXPECT_TRUE(parquet::arrow::WriteTable(*table, arrow::default_memory_pool(), *out, /*chunk_size=*/7,
                                           std::make_shared<parquet::WriterProperties>(props))
                    .ok());
    EXPECT_TRUE((*out)->Close().ok());
    return path;
  }

  // Every cell of `m`, decoded from the range its sample would fetch, equals what was written.
  void expect_cells(const Manifest& m, const std::string& path, int rows) {
    std::ifstream in(path, std::ios::binary);
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(m.samples.size(), static_cast<std::size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      const ShardSample& s = m.samples[r];
      ASSERT_EQ(s.member_count, static_cast<std::uint32_t>(r % 3)) << r;
      for (std::uint32_t e = 0; e < s.member_count; ++e) {
        const ShardMember& member = m.members[s.first_member + e];
        const CellPlace& place = m.cells[s.first_member + e];
        EXPECT_EQ(member.suffix, "images[" + std::to_string(e) + "]");
        const ParquetCell cell{m.chunks[place.chunk], place.first_row, place.row, place.element};
        std::vector<std::byte> out(3, std::byte{9});  // appended after what is there
        auto got =
            parquet_value(cell, std::as_bytes(std::span(file.data() + member.offset, member.size)), kMaxBytes, out);
        ASSERT_TRUE(got.ok()) << got.error().to_string();
        EXPECT_EQ(got->offset, 3u);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data() + got->offset), got->length),
                  image_bytes(r, static_cast<int>(e)))
            << "row " << r << " element " << e;
      }
    }
  }

  std::filesystem::path dir_;
};

TEST_F(ParquetTest, RowsBecomeJsonAndCellsDecodeFromTheirPage) {
  const std::string path = write("plain.parquet", 20,
                                 *parquet::WriterProperties::Builder()
                                      .disable_dictionary()
                                      ->compression(parquet::Compression::UNCOMPRESSED)
                                      ->enable_write_page_index()
                                      ->data_pagesize(512)
                                      ->write_batch_size(1)
                                      ->build());
  std::vector<ManifestLine> lines;
  auto m = read_parquet(path, {path}, 1 << 20, {}, 0, lines);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(lines.size(), 20u);
  EXPECT_EQ(std::string_view(m->text).substr(lines[0].offset, lines[0].length),
            R"({"id":"s0","text":"say \"0\"\n","images":[]})");
  EXPECT_EQ(std::string_view(m->text).substr(lines[5].offset, lines[5].length),
            R"({"id":"s5","text":"say \"5\"\n","images":["images[0]","images[1]"]})");
  expect_cells(*m, path, 20);
  // With a page index and small pages, a cell's range is a page, not its row group's chunk.
  const auto biggest = std::max_element(m->members.begin(), m->members.end(),
                                        [](const ShardMember& a, const ShardMember& b) { return a.size < b.size; });
  EXPECT_LT(biggest->size, 4000u);
}

TEST_F(ParquetTest, DictionaryPagesAndFilesWithoutAnIndexDecodeToo) {
  const std::string dict = write("dict.parquet", 16,
                                 *parquet::WriterProperties::Builder()
                                      .compression(parquet::Compression::SNAPPY)
                                      ->enable_write_page_index()
                                      ->data_pagesize(512)
                                      ->write_batch_size(1)
                                      ->build());
  std::vector<ManifestLine> lines;
  auto m = read_parquet(dict, {dict}, 1 << 20, {}, 0, lines);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  expect_cells(*m, dict, 16);
  const std::string bare = write("bare.parquet", 16,
                                 *parquet::WriterProperties::Builder()
                                      .compression(parquet::Compression::SNAPPY)
                                      ->disable_write_page_index()
                                      ->build());
  lines.clear();
  m = read_parquet(bare, {bare}, 1 << 20, {}, 0, lines);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  expect_cells(*m, bare, 16);
}

TEST_F(ParquetTest, LimitsAndDamageAreNamed) {
  // Rows 12-23 hold 20000 bytes of text each: 240 KB of columns beside a footer of tens of KB.
  const std::string path = write("t.parquet", 24,
                                 *parquet::WriterProperties::Builder()
                                      .enable_write_page_index()
                                      ->compression(parquet::Compression::SNAPPY)
                                      ->build());
  std::vector<ManifestLine> lines;
  auto m = read_parquet(path, {path}, 100000, {}, 0, lines);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(m.error().to_string().find("other than the images' bytes hold"), std::string::npos)
      << m.error().to_string();
  EXPECT_NE(m.error().to_string().find("t.parquet"), std::string::npos);
  // A file cut short: refused at open, by name.
  std::ifstream in(path, std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream((dir_ / "cut.parquet").string(), std::ios::binary) << whole.substr(0, whole.size() / 2);
  m = read_parquet((dir_ / "cut.parquet").string(), {(dir_ / "cut.parquet").string()}, 1 << 20, {}, 0, lines);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().to_string().find("cut.parquet"), std::string::npos) << m.error().to_string();
  // Not Parquet, or a footer longer than the limit or the file: refused before it is read.
  std::ofstream((dir_ / "text.parquet").string(), std::ios::binary) << "{\"id\": 1, \"text\": \"not parquet\"}\n";
  m = read_parquet((dir_ / "text.parquet").string(), {(dir_ / "text.parquet").string()}, 1 << 20, {}, 0, lines);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().to_string().find("not a Parquet file (it does not end with PAR1)"), std::string::npos)
      << m.error().to_string();
  std::string lying = whole;
  lying.replace(lying.size() - 8, 4, std::string("\xff\xff\xff\x7f", 4));
  std::ofstream((dir_ / "lying.parquet").string(), std::ios::binary) << lying;
  m = read_parquet((dir_ / "lying.parquet").string(), {(dir_ / "lying.parquet").string()}, 1 << 20, {}, 0, lines);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().to_string().find("its footer says it is 2147483647 bytes, more than max_manifest_bytes"),
            std::string::npos)
      << m.error().to_string();
  // Pages that do not hold the cell's row: an error naming the column and row, not a crash.
  lines.clear();
  m = read_parquet(path, {path}, 1 << 20, {}, 0, lines);
  ASSERT_TRUE(m.ok());
  const CellPlace& p = m->cells.back();
  const ParquetCell cell{m->chunks[p.chunk], p.first_row, p.row + 50, p.element};
  const ShardMember& member = m->members.back();
  std::vector<std::byte> out;
  auto got = parquet_value(cell, std::as_bytes(std::span(whole.data() + member.offset, member.size)), kMaxBytes, out);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().to_string().find("images of row"), std::string::npos) << got.error().to_string();
  got = parquet_value(cell, std::as_bytes(std::span(whole.data() + member.offset, member.size / 2)), kMaxBytes, out);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), ErrorCode::kCorruptData);
}

}  // namespace
}  // namespace mmfeed::dataset
