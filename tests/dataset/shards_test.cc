// WebDataset tar shards (dataset/shards.h): brace patterns, tar headers, and what a scan makes of
// whole, damaged and unusual shards. The shards are written here byte by byte, so every layout
// (GNU long names, PAX records, no end-of-archive blocks, a cut) is exactly the one asked for.
#include "dataset/shards.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unordered_set>

namespace mmfeed::dataset {
namespace {

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

// A 512-byte ustar header; `size_field` overrides the size's octal text.
std::string header(const std::string& name, std::uint64_t size, char type = '0', std::string size_field = "") {
  std::string h(512, '\0');
  h.replace(0, name.size(), name);
  h.replace(100, 7, "0000644");
  if (size_field.empty()) {
    char octal[16];
    std::snprintf(octal, sizeof octal, "%011llo", static_cast<unsigned long long>(size));
    size_field = octal;
  }
  h.replace(124, size_field.size(), size_field);
  h.replace(136, 11, "00000000000");
  h[156] = type;
  h.replace(257, 6, std::string("ustar\0", 6));
  h.replace(263, 2, "00");
  h.replace(148, 8, "        ");
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  char check[8];
  std::snprintf(check, sizeof check, "%06o", sum);
  h.replace(148, 7, std::string(check, 6) + '\0');
  return h;
}

std::string member(const std::string& name, const std::string& data, char type = '0') {
  std::string out = header(name, data.size(), type) + data;
  out.resize((out.size() + 511) / 512 * 512, '\0');
  return out;
}

std::string end_blocks() { return std::string(1024, '\0'); }

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-shards-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }

  Result<Manifest> read(const std::string& source, std::size_t limit = 1 << 20) {
    lines_.clear();
    MMFEED_ASSIGN_OR_RETURN(std::vector<std::string> shards, expand_braces(source));
    return read_shards(source, shards, limit, storage::S3Options{}, 0, lines_);
  }

  std::string text_of(const Manifest& m, std::size_t i) const {
    return m.text.substr(lines_[i].offset, lines_[i].length);
  }

  std::filesystem::path dir_;
  std::vector<ManifestLine> lines_;
};

TEST(BraceTest, ListsAndRangesExpandInOrder) {
  EXPECT_EQ(*expand_braces("a/shard-{000..003}.tar"),
            (std::vector<std::string>{"a/shard-000.tar", "a/shard-001.tar", "a/shard-002.tar", "a/shard-003.tar"}));
  EXPECT_EQ(*expand_braces("{8..10}.tar"), (std::vector<std::string>{"8.tar", "9.tar", "10.tar"}));
  EXPECT_EQ(*expand_braces("{x,y}/{0..1}.tar"), (std::vector<std::string>{"x/0.tar", "x/1.tar", "y/0.tar", "y/1.tar"}));
  EXPECT_EQ(*expand_braces("plain.tar"), (std::vector<std::string>{"plain.tar"}));
  for (const char* bad : {"a{0..3.tar", "a}.tar", "{{a}}.tar", "{5..2}.tar", "{a..b}.tar", "{0..99999999}.tar"}) {
    EXPECT_FALSE(expand_braces(bad).ok()) << bad;
  }
  EXPECT_NE(expand_braces("{5..2}.tar").error().message().find("descends"), std::string::npos);
}

TEST(BraceTest, Issue48ALongPrefixIsCountedInBytesBeforeAnyNameIsMade) {
  // 1,000,001 names of 20 KB each: 20 GB, refused from the pattern's own arithmetic.
  const std::string pattern = std::string(20'000, 'p') + "{0..1000000}.tar";
  auto r = expand_braces(pattern);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message().find("names take more than the 268435456 bytes"), std::string::npos)
      << r.error().message();
  EXPECT_LT(r.error().context().size(), 300u);  // the pattern shown, not echoed whole
}

TEST(BraceTest, Issue48ManyPatternsDrawOnOneBudget) {
  NameBudget budget;
  auto first = expand_braces("{0..1000000}.tar", budget);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 1'000'001u);
  EXPECT_EQ(budget.names, kMaxShardsPerSource - 1'000'001);
  auto second = expand_braces("{0..1000000}.tar", budget);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message().find("more than the 48575 shards left to its source (1048576 in all)"),
            std::string::npos)
      << second.error().message();
  // The prefix every name is given later counts too.
  NameBudget rooted{.prefix = 3000};
  EXPECT_FALSE(expand_braces("{0..99999}.tar", rooted).ok());  // 100,000 x ~3 KB > 256 MiB
}

TEST(BraceTest, TheCountedBytesAreTheNamesBytes) {
  NameBudget budget{.prefix = 3};
  auto names = expand_braces("s-{8..12}/{a,bc}-{007..9}.tar", budget);
  ASSERT_TRUE(names.ok());
  std::size_t bytes = 0;
  for (const std::string& n : *names) bytes += n.size() + 3;
  EXPECT_EQ(names->size(), 5u * 2 * 3);
  EXPECT_EQ(kMaxShardNameBytes - budget.bytes, bytes);
  EXPECT_EQ((*names)[0], "s-8/a-007.tar");
}

TEST(EnergonSplitTest, Issue48ExcludesAreASetNotAScan) {
  // 300,000 train shards and the same 300,000 excluded: each looked up once.
  const std::string yaml =
      "split_parts:\n  train:\n    - 'shard-{0..299999}.tar'\nexclude:\n  - 'shard-{0..299999}.tar'\n"
      "  - 'shard-{0..9}.tar/key'\n";
  auto r = parse_energon_split(yaml, "/data/ds", "/data/ds/.nv-meta/split.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(), "/data/ds/.nv-meta/split.yaml: its train split names no shard");
  auto kept = parse_energon_split("split_parts:\n  train: ['a-{0..3}.tar']\nexclude: ['a-1.tar', 'a-2.tar/k7']\n", "/d",
                                  "split.yaml");
  ASSERT_TRUE(kept.ok()) << kept.error().to_string();
  EXPECT_EQ(kept->shards, (std::vector<std::string>{"/d/a-0.tar", "/d/a-2.tar", "/d/a-3.tar"}));
  EXPECT_EQ(kept->excluded_samples, (std::unordered_set<std::string>{"/d/a-2.tar/k7"}));
}

TEST(EnergonSplitTest, Issue48ASplitFilesPatternsAreBoundedAllTold) {
  // 50 short patterns of a million names each: a 1 KB file that would expand to gigabytes.
  std::string yaml = "split_parts:\n  train:\n";
  for (int i = 0; i < 50; ++i) yaml += "    - 'p" + std::to_string(i) + "-{0..1000000}.tar'\n";
  auto r = parse_energon_split(yaml, "/data/ds", "split.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().to_string().find("split.yaml: split_parts.train: p1-{0..1000000}.tar: the pattern names more"),
            std::string::npos)
      << r.error().to_string();
}

TEST(TarHeaderTest, DecodesUstarAndRefusesABadChecksum) {
  std::string h = header("dir/a1.0.jpg", 1234);
  auto parsed = parse_tar_header(bytes_of(h));
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_EQ((*parsed)->name, "dir/a1.0.jpg");
  EXPECT_EQ((*parsed)->size, 1234u);
  h[10] = 'x';  // changed after the checksum
  ASSERT_FALSE(parse_tar_header(bytes_of(h)).ok());
  EXPECT_NE(parse_tar_header(bytes_of(h)).error().message().find("checksum"), std::string::npos);
  EXPECT_FALSE(parse_tar_header(bytes_of(std::string(512, '\0')))->has_value());  // the end of the archive
  // A size past the octal field's range, in GNU base-256: 2^40 bytes.
  const std::string big = header("big.bin", 0, '0', std::string("\x80\0\0\0\0\0\x01\0\0\0\0\0", 12));
  EXPECT_EQ((*parse_tar_header(bytes_of(big)))->size, std::uint64_t{1} << 40);
  EXPECT_FALSE(parse_tar_header(bytes_of(header("a.bin", 0, '0', "12x4"))).ok());  // not octal
}

TEST(TarHeaderTest, MemberNamesSplitAtTheFirstDotOfTheFileName) {
  EXPECT_EQ(split_member_name("d.x/a1.0.jpg")->first, "d.x/a1");
  EXPECT_EQ(split_member_name("d.x/a1.0.jpg")->second, "0.jpg");
  EXPECT_EQ(split_member_name("a1.json")->second, "json");
  EXPECT_FALSE(split_member_name("README").has_value());
  EXPECT_FALSE(split_member_name("d/.hidden").has_value());
}

TEST_F(ShardTest, SamplesAreTheRunsOfMembersSharingAKey) {
  const std::string image(700, 'i');
  const std::string shard = member("a1.json", R"({"id":"one"})") + member("a1.0.jpg", image) +
                            member("b2.1.png", "png") + member("b2.json", R"({"id":"two"})") + member("README", "x") +
                            end_blocks();
  auto m = read(write("s-0.tar", shard));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->samples.size(), 2u);
  EXPECT_EQ(m->samples[0].key, "a1");
  EXPECT_EQ(text_of(*m, 0), R"({"id":"one"})");
  EXPECT_EQ(text_of(*m, 1), R"({"id":"two"})");
  const ShardMember& jpg = m->members[m->samples[0].first_member + 1];
  EXPECT_EQ(jpg.suffix, "0.jpg");
  EXPECT_EQ(shard.substr(jpg.offset, jpg.size), image);
  EXPECT_FALSE(m->samples[0].error.has_value());
}

TEST_F(ShardTest, LongNamesAndPaxRecordsNameTheNextMember) {
  const std::string long_key = "sub/" + std::string(120, 'k');
  const std::string pax_record = "23 path=p/" + std::string(7, 'q') + ".json\n";
  ASSERT_EQ(pax_record.size(), 23u);
  const std::string shard = member("././@LongLink", long_key + ".json", 'L') + member("ignored", R"({"id":"L"})") +
                            member("pax", pax_record, 'x') + member("ignored2", R"({"id":"P"})") + end_blocks();
  auto m = read(write("s-1.tar", shard));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->samples.size(), 2u);
  EXPECT_EQ(m->samples[0].key, long_key);
  EXPECT_EQ(m->samples[1].key, "p/qqqqqqq");
  EXPECT_EQ(text_of(*m, 1), R"({"id":"P"})");
}

TEST_F(ShardTest, WindowsAreReadFromEachHeaderAndLargeMembersSkipped) {
  // Members larger than the scan window are jumped over; a .json member larger than it is read whole.
  const std::string big(static_cast<std::size_t>(kScanWindow) * 3 + 5, 'b');
  const std::string json = R"({"id":"x","pad":")" + std::string(static_cast<std::size_t>(kScanWindow) + 9, 'p') + "\"}";
  const std::string shard =
      member("x.0.bin", big) + member("x.json", json) + member("y.json", "{}") + member("y.1.bin", big) + end_blocks();
  auto m = read(write("s-2.tar", shard), 4 << 20);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->samples.size(), 2u);
  EXPECT_EQ(text_of(*m, 0), json);
  EXPECT_EQ(m->members[m->samples[1].first_member + 1].size, big.size());
}

TEST_F(ShardTest, AShardWithoutEndBlocksEndsAtItsLastMember) {
  auto m = read(write("s-3.tar", member("a.json", "{}") + member("a.0.jpg", "jpeg")));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->samples.size(), 1u);
  EXPECT_FALSE(m->samples[0].error.has_value());
}

TEST_F(ShardTest, DamageFailsTheSamplesItTouchesAndNamesThem) {
  std::string cut = member("a.json", "{}") + member("b.json", "{}") + member("b.0.jpg", std::string(2000, 'j'));
  cut.resize(cut.size() - 1500);  // b.0.jpg cut short: its header says 2000 bytes
  auto m = read(write("cut.tar", cut));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->samples.size(), 2u);
  EXPECT_FALSE(m->samples[0].error.has_value());
  ASSERT_TRUE(m->samples[1].error.has_value());
  EXPECT_NE(m->samples[1].error->message().find("the shard ends before byte"), std::string::npos);

  std::string cut_json = member("a.json", "{}") + member("b.0.jpg", "j") + member("b.json", std::string(900, ' '));
  cut_json.resize(cut_json.size() - 400);  // b.json cut short: the scan must not ask for it forever
  m = read(write("cut-json.tar", cut_json));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->samples.size(), 2u);
  EXPECT_NE(m->samples[1].error->message().find("the shard ends before byte"), std::string::npos);

  m = read(write("partial-header.tar", member("a.json", "{}") + std::string(100, 'h')));
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->samples.size(), 2u);
  EXPECT_NE(m->samples[1].error->message().find("the shard ends 100 bytes into a tar header"), std::string::npos);

  std::string corrupt = member("a.json", "{}") + member("b.json", "{}") + member("c.json", "{}") + end_blocks();
  corrupt[1024 + 20] ^= 0x55;  // b.json's header
  m = read(write("corrupt.tar", corrupt));
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->samples.size(), 2u);
  EXPECT_EQ(m->samples[1].key, "from byte 1024");
  EXPECT_NE(m->samples[1].error->message().find("unreadable from byte 1024"), std::string::npos);

  const std::string odd = member("a.0.jpg", "x") + member("b.json", "{}") + member("b.json", "{}") +
                          member("c.json", std::string(3000, ' ')) + end_blocks();
  m = read(write("odd.tar", odd), 2048);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->samples.size(), 3u);
  EXPECT_NE(m->samples[0].error->message().find("no .json member (its members: 0.jpg)"), std::string::npos);
  EXPECT_NE(m->samples[1].error->message().find("two members named b.json"), std::string::npos);
  EXPECT_NE(m->samples[2].error->message().find("more than max_manifest_bytes"), std::string::npos);

  EXPECT_EQ(read(write("empty.tar", "")).value().samples[0].error->message().find("the shard is empty"), 0u);
  EXPECT_EQ(read((dir_ / "missing.tar").string()).error().code(), ErrorCode::kNotFound);
}

TEST_F(ShardTest, BracePatternsReadEveryShardAsOneSource) {
  for (int i = 0; i < 3; ++i) {
    write("p-" + std::to_string(i) + ".tar", member("k" + std::to_string(i) + ".json", "{}") + end_blocks());
  }
  auto m = read((dir_ / "p-{0..2}.tar").string());
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_EQ(m->shards.size(), 3u);
  ASSERT_EQ(m->samples.size(), 3u);
  EXPECT_EQ(m->samples[2].shard, 2u);
  EXPECT_EQ(m->samples[2].key, "k2");
}

// A sample read by its byte range (Energon's .tar.idx gives it): its members and .json as the scan
// finds them, long names and PAX records included; a range that cuts a member, holds two samples
// or no .json is that sample's error.
TEST_F(ShardTest, ASampleReadByItsRangeIsTheScannedSample) {
  const std::string image(700, 'i');
  const std::string long_key = "sub/" + std::string(120, 'k');
  const std::string a = member("a1.json", R"({"id":"one"})") + member("a1.0.jpg", image);
  const std::string b = member("././@LongLink", long_key + ".json", 'L') + member("ignored", R"({"id":"L"})");
  const std::string shard = a + b + member("c3.0.jpg", image) + end_blocks();
  const std::string path = write("r-0.tar", shard);
  const Manifest scanned = read(path).value();
  const RangeSample first = read_shard_range(path, 0, a.size(), 1 << 20).value();
  EXPECT_EQ(first.key, "a1");
  EXPECT_EQ(first.json, R"({"id":"one"})");
  ASSERT_EQ(first.members.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const ShardMember& expected = scanned.members[scanned.samples[0].first_member + i];
    EXPECT_EQ(first.members[i].suffix, expected.suffix);
    EXPECT_EQ(first.members[i].offset, expected.offset);
    EXPECT_EQ(first.members[i].size, expected.size);
  }
  EXPECT_EQ(read_shard_range(path, a.size(), b.size(), 1 << 20).value().key, long_key);

  const auto refused = [&](std::uint64_t offset, std::uint64_t length, std::size_t limit, const std::string& says) {
    auto r = read_shard_range(path, offset, length, limit);
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_NE(r.error().message().find(says), std::string::npos) << r.error().to_string();
  };
  refused(0, a.size() - 512, 1 << 20, "runs past the sample's range");
  refused(0, a.size() + b.size(), 1 << 20, "two samples' members (a1, " + long_key + ")");
  refused(a.size() + b.size(), 1536, 1 << 20, "no .json member (its members: 0.jpg)");
  refused(0, a.size(), 4, "more than max_manifest_bytes");
  refused(100, 512, 1 << 20, "not a tar header");
  EXPECT_EQ(read_shard_range((dir_ / "missing.tar").string(), 0, 512, 1 << 20).error().code(), ErrorCode::kNotFound);
}

// An Energon dataset whose shards have the .tar.idx energon prepare writes opens from them: its
// samples' ranges, not its shards' bytes (energon prepare's own output: tests/python/data/test_shards.py).
TEST_F(ShardTest, AnEnergonDatasetOpensFromItsTarIndexes) {
  std::filesystem::create_directories(dir_ / "e" / ".nv-meta");
  std::ofstream(dir_ / "e" / ".nv-meta" / "split.yaml") << "split_parts:\n  train:\n  - s-{0..1}.tar\nexclude: []\n";
  const std::string a = member("a.json", R"({"id":"a"})") + member("a.0.jpg", "jpeg");
  const std::string b = member("b.json", R"({"id":"b"})");
  const auto index_of = [](std::initializer_list<std::uint64_t> starts) {
    std::string out;
    for (std::uint64_t v : starts) {
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    return out;
  };
  write("e/s-0.tar", a + b + end_blocks());
  write("e/s-1.tar", b + end_blocks());
  std::vector<ManifestLine> lines;
  // Without a .tar.idx beside every shard, they are scanned.
  write("e/s-0.tar.idx", index_of({0, a.size(), a.size() + b.size()}));
  auto scanned = read_energon_dataset((dir_ / "e").string(), 1 << 20, {}, 0, lines);
  ASSERT_TRUE(scanned.ok()) << scanned.error().to_string();
  EXPECT_FALSE(scanned->ranges.has_value());
  write("e/s-1.tar.idx", index_of({0, b.size()}));
  lines.clear();
  auto m = read_energon_dataset((dir_ / "e").string(), 1 << 20, {}, 0, lines);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  ASSERT_TRUE(m->ranges.has_value());
  EXPECT_TRUE(lines.empty() && m->text.empty() && m->samples.empty());
  EXPECT_EQ(m->ranges->samples(), 3u);
  EXPECT_EQ(m->ranges->shard_of(2), 1u);
  // A .tar.idx older than its shard, or not rising through it, is refused by name.
  const auto touch_later = [&](const std::string& name) {
    std::filesystem::last_write_time(
        dir_ / name, std::filesystem::last_write_time(dir_ / "e/s-1.tar.idx") + std::chrono::seconds(5));
  };
  touch_later("e/s-1.tar");
  auto stale = read_energon_dataset((dir_ / "e").string(), 1 << 20, {}, 0, lines);
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().to_string().find("s-1.tar.idx"), std::string::npos) << stale.error().to_string();
  EXPECT_NE(stale.error().to_string().find("stale"), std::string::npos) << stale.error().to_string();
  write("e/s-1.tar.idx", index_of({0, 100}));
  touch_later("e/s-1.tar.idx");
  auto damaged = read_energon_dataset((dir_ / "e").string(), 1 << 20, {}, 0, lines);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.error().to_string().find("does not follow its samples"), std::string::npos)
      << damaged.error().to_string();
}

}  // namespace
}  // namespace mmfeed::dataset
