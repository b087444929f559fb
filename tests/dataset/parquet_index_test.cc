// A Parquet file's index read back (dataset/parquet_index.h), from bytes written here to its
// layout: a well-formed one gives the rows, members and image places it states; every count a
// header claims is checked against the bytes before anything is held (a claim of 2^60 rows is
// refused, not allocated); an entry outside its text, names or file, a damaged body, another
// version or a stamp of another file are refused, naming the index.
#include "dataset/parquet_index.h"

#include <gtest/gtest.h>

#include <string>

#include "dataset/le_bytes.h"

namespace mmfeed::dataset {
namespace {

struct Built {
  std::uint64_t rows = 2, images = 1;
  std::string text = "{\"a\":1}\n{\"images\":[\"images[0]\"]}\n";
  std::string names = "images[0]";
  std::uint64_t value_offset = 100, value_length = 50, file_size = 1000;
  std::uint32_t row1_images = 1;
  bool damage = false;
  std::uint32_t version = 1;

  std::string bytes() const {
    std::string body;
    put_le(body, 0, 8);  // row 0: its text, no image
    put_le(body, 8, 4);
    put_le(body, 0, 4);
    put_le(body, 8, 8);  // row 1: one image
    put_le(body, text.size() - 8, 4);
    put_le(body, row1_images, 4);
    put_le(body, 64, 8);  // its page
    put_le(body, 400, 8);
    put_le(body, value_offset, 8);
    put_le(body, value_length, 8);
    put_le(body, 32, 4);  // width, height
    put_le(body, 24, 4);
    put_le(body, 0, 4);  // its name
    put_le(body, names.size(), 4);
    body += text + names;
    std::string out = "mmfeedPQ";
    put_le(out, version, 4);
    put_le(out, 0, 4);
    put_le(out, rows, 8);
    put_le(out, images, 8);
    put_le(out, text.size(), 8);
    put_le(out, names.size(), 8);
    put_le(out, file_size, 8);
    put_le(out, 777, 8);  // mtime
    put_le(out, 0, 4);
    put_le(out, crc32_of(body.data(), body.size()), 4);
    if (damage) body[body.size() / 2] ^= 1;
    return out + body;
  }
};

SourceStamp stamp() {
  SourceStamp s;
  s.size = 1000;
  s.mtime_ns = 777;
  return s;
}

Status read(const std::string& bytes, Manifest& rows, std::vector<ManifestLine>& lines,
            const SourceStamp& now = stamp()) {
  return read_parquet_index({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "x.parquet.mmidx", now,
                            1 << 20, 3, rows, lines);
}

std::string refusal(const Built& b, const SourceStamp& now = stamp()) {
  Manifest rows;
  std::vector<ManifestLine> lines;
  const Status s = read(b.bytes(), rows, lines, now);
  return s.ok() ? "" : s.error().to_string();
}

TEST(ParquetIndexTest, ReadsTheRowsAndImagePlacesItStates) {
  Manifest rows;
  std::vector<ManifestLine> lines;
  ASSERT_TRUE(read(Built{}.bytes(), rows, lines).ok());
  EXPECT_EQ(rows.text, Built{}.text);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].offset, 8u);
  EXPECT_EQ(lines[1].manifest, 3u);
  EXPECT_EQ(lines[1].number, 1u);
  ASSERT_EQ(rows.samples.size(), 2u);
  EXPECT_EQ(rows.samples[1].key, "1");
  EXPECT_EQ(rows.samples[1].member_count, 1u);
  ASSERT_EQ(rows.members.size(), 1u);
  EXPECT_EQ(rows.members[0].suffix, "images[0]");
  EXPECT_EQ(rows.members[0].offset, 64u);  // its page, as the file read whole places it
  EXPECT_EQ(rows.members[0].size, 400u);
  ASSERT_TRUE(rows.cells[0].value.has_value());
  EXPECT_EQ(rows.cells[0].value->offset, 100u);
  EXPECT_EQ(rows.cells[0].value->length, 50u);
}

TEST(ParquetIndexTest, RefusesCountsTheBytesDoNotHold) {
  Built huge;
  huge.rows = std::uint64_t{1} << 60;
  EXPECT_NE(refusal(huge).find("truncated or extended"), std::string::npos) << refusal(huge);
  Built images;
  images.images = UINT64_MAX / 8;
  EXPECT_NE(refusal(images).find("truncated or extended"), std::string::npos);
  const std::string cut = Built{}.bytes().substr(0, 100);
  Manifest rows;
  std::vector<ManifestLine> lines;
  EXPECT_FALSE(read(cut, rows, lines).ok());
  EXPECT_NE(read("short", rows, lines).error().to_string().find("not the index of a Parquet file"), std::string::npos);
}

TEST(ParquetIndexTest, RefusesEntriesOutsideTheirTextNamesOrFile) {
  Built past_file;
  past_file.value_offset = 990;  // 990 + 50 > the file's 1000 bytes
  EXPECT_NE(refusal(past_file).find("outside its names or its file"), std::string::npos) << refusal(past_file);
  Built too_many;
  too_many.row1_images = 2;  // more than the index holds
  EXPECT_NE(refusal(too_many).find("outside its text or images"), std::string::npos) << refusal(too_many);
}

TEST(ParquetIndexTest, RefusesADamagedOrStaleOrForeignVersionIndexNamingIt) {
  Built damaged;
  damaged.damage = true;
  EXPECT_NE(refusal(damaged).find("damaged (CRC-32)"), std::string::npos);
  EXPECT_NE(refusal(damaged).find("x.parquet.mmidx"), std::string::npos);
  Built other;
  other.version = 2;
  EXPECT_NE(refusal(other).find("version 2"), std::string::npos);
  SourceStamp later = stamp();
  later.mtime_ns = 778;
  EXPECT_NE(refusal(Built{}, later).find("modified since"), std::string::npos);
  SourceStamp remote = stamp();
  remote.mtime_ns = 0;
  remote.etag_crc = 5;
  EXPECT_NE(refusal(Built{}, remote).find("stale"), std::string::npos);
}

}  // namespace
}  // namespace mmfeed::dataset
