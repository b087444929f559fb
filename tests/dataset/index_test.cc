// The dataset index (include/mmfeed/index.h): its records are the Loader's own reading of the
// manifest (read_manifests' lines, at file offsets, the same CRC-32), a JSON array and a
// byte-order mark included; a stale, truncated, tampered, foreign or non-index file is refused
// by name; bad samples are flagged and named; media facts are their headers'; remote and
// compressed sources are refused.
#include "mmfeed/index.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dataset/manifest.h"
#include "mmfeed/audio.h"
#include "text/chat_encode.h"
#include "text/conversation.h"
#include "text/tokenizer.h"
#include "vision/decode.h"
#include "vision/video.h"

namespace mmfeed {
namespace {

namespace fs = std::filesystem;

class IndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mmfeed-index-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
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

  // Every record against the manifest as the Loader reads it, the text at its range the line's.
  static void expect_as_loader(const std::string& source, const DatasetIndex& index) {
    const dataset::Manifests m = dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {},
                                                         {.use = false, .cache_dir = "", .media_root = {}})
                                     .value();
    std::string buffer;
    ASSERT_EQ(index.records.size(), m.size());
    EXPECT_EQ(index.source_crc32, m.files[0].crc32);
    EXPECT_EQ(index.array, m.files[0].array);
    const std::string file = read(source);
    for (std::size_t i = 0; i < m.size(); ++i) {
      EXPECT_EQ(index.records[i].number, m.held[i].number);
      EXPECT_EQ(file.substr(index.records[i].offset, index.records[i].length), m.text(m.held[i], buffer).value()) << i;
    }
  }

  fs::path dir_;
};

constexpr const char* kImage = R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"},)"
                               R"( {"type": "text", "text": "What?"}]}, {"role": "assistant", "content": "A."}]})";
constexpr const char* kVideo = R"({"messages": [{"role": "user", "content": [{"type": "video", "video": "v.mp4"},)"
                               R"( {"type": "image", "image": "b.png"}]}, {"role": "assistant", "content": "B."}]})";

TEST_F(IndexTest, RecordsAreTheLoadersLinesAtFileOffsets) {
  const std::string source = write(
      "train.jsonl", std::string("\xEF\xBB\xBF") + kImage + "\n\n" + kVideo + "\n{\"not\": \"a conversation\"}\n");
  const IndexSummary s = build_index(source).value();
  EXPECT_EQ(s.path, source + ".mmidx");
  EXPECT_EQ(s.samples, 3u);
  EXPECT_EQ(s.images, 2u);
  EXPECT_EQ(s.videos, 1u);
  ASSERT_EQ(s.bad_count, 1u);
  EXPECT_NE(s.bad[0].find("train.jsonl:4"), std::string::npos) << s.bad[0];
  EXPECT_EQ(s.index_bytes, 96u + 16 + 3 * 40 + 3 * 16);  // a block; three media: a.jpg; v.mp4 and b.png
  EXPECT_EQ(s.media_unreadable, 3u);                     // none of them is there
  EXPECT_EQ(fs::file_size(s.path), s.index_bytes);
  const DatasetIndex index = open_index(s.path, source).value();
  expect_as_loader(source, index);
  EXPECT_EQ(index.records[0].offset, 3u);  // after the byte-order mark
  EXPECT_EQ(index.records[1].number, 3u);  // the blank line is not a sample
  EXPECT_EQ(index.records[1].videos, 1u);
  EXPECT_FALSE(index.records[1].bad);
  EXPECT_TRUE(index.records[2].bad);
  EXPECT_FALSE(fs::exists(s.path + ".partial"));
}

TEST_F(IndexTest, AJsonArraysElements) {
  const std::string source = write("train.json", std::string("[\n  ") + kImage + ",\n  " + kVideo + "\n]\n");
  const std::string out = (dir_ / "elsewhere.idx").string();
  const IndexSummary s = build_index(source, {.out = out, .media_root = "", .probe_media = true}).value();
  EXPECT_EQ(s.path, out);
  const DatasetIndex index = open_index(out, source).value();
  EXPECT_TRUE(index.array);
  expect_as_loader(source, index);
  EXPECT_EQ(index.records[1].number, 1u);
}

TEST_F(IndexTest, AStaleIndexIsRefused) {
  const std::string source = write("train.jsonl", std::string(kImage) + "\n");
  const std::string path = build_index(source).value().path;
  write("train.jsonl", std::string(kImage) + "\n" + kVideo + "\n");  // rewritten since
  auto r = open_index(path, source);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().to_string().find("stale"), std::string::npos) << r.error().to_string();
  EXPECT_NE(r.error().to_string().find(path), std::string::npos);
  // Another file of the same name's index (another size) is refused the same way.
  const std::string other = write("other.jsonl", std::string(kVideo) + "\n");
  EXPECT_FALSE(open_index(path, other).ok());
}

TEST_F(IndexTest, ATruncatedOrTamperedIndexIsRefusedByName) {
  const std::string source = write("train.jsonl", std::string(kImage) + "\n" + kVideo + "\n");
  const std::string path = build_index(source).value().path;
  const std::string good = read(path);
  const auto refused = [&](const std::string& bytes, const std::string& says) {
    const std::string bad = write("bad.mmidx", bytes);
    auto r = open_index(bad, source);
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_NE(r.error().to_string().find(says), std::string::npos) << r.error().to_string();
    EXPECT_NE(r.error().to_string().find("bad.mmidx"), std::string::npos) << r.error().to_string();
  };
  refused(good.substr(0, good.size() - 1), "truncated");
  refused(good + std::string(40, '\0'), "truncated or extended");
  refused(good.substr(0, 10), "not an mmfeed index");
  refused("x" + good.substr(1), "not an mmfeed index");
  std::string table = good;
  table[96 + 8] ^= 1;  // where the first block's media begin
  refused(table, "block table is damaged");
  std::string record = good;
  record[96 + 16 + 24] ^= 1;  // a record's length
  refused(record, "block 0 (samples 0-1) is damaged");
  std::string media = good;
  media[media.size() - 16] ^= 1;  // the last medium's width
  refused(media, "block 0 (samples 0-1): its media entries are damaged");
  std::string header = good;
  header[16] ^= 1;  // the sample count
  refused(header, "header is damaged");
  EXPECT_TRUE(open_index(path, source).ok());
}

// A rank reads the blocks of the samples it asks for: a block is checked when first touched, a
// damaged one found then and named (the index and its block), the others still read.
TEST_F(IndexTest, BlocksAreCheckedWhenFirstTouched) {
  std::string text;
  for (int i = 0; i < 600; ++i) text += std::string(i % 2 == 0 ? kImage : kVideo) + "\n";  // 3 blocks of 256
  const std::string source = write("train.jsonl", text);
  const std::string path = build_index(source).value().path;
  std::string bytes = read(path);
  bytes[96 + 3 * 16 + 599 * 40 + 24] ^= 1;  // the last record's length, in block 2
  write("train.jsonl.mmidx", bytes);
  auto index = dataset::MappedIndex::open(path, source, dataset::stamp_source(source, {}).value());
  ASSERT_TRUE(index.ok()) << index.error().to_string();  // the header and block table check out
  EXPECT_EQ((*index)->blocks_checked(), 0u);
  EXPECT_EQ((*index)->record(0).value().number, 1u);
  EXPECT_EQ((*index)->record(300).value().number, 301u);
  EXPECT_EQ((*index)->record(1).value().number, 2u);
  EXPECT_EQ((*index)->blocks_checked(), 2u);
  auto damaged = (*index)->record(598);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.error().code(), ErrorCode::kCorruptData);
  EXPECT_NE(damaged.error().to_string().find("block 2 (samples 512-599) is damaged"), std::string::npos)
      << damaged.error().to_string();
  EXPECT_NE(damaged.error().to_string().find(path), std::string::npos);
  // Through the manifest reader: the samples of the good blocks read, the damaged one's an error.
  const dataset::Manifests m = dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {}).value();
  std::string buffer;
  EXPECT_EQ(m.text(m.line(10).value(), buffer).value(), kImage);
  EXPECT_FALSE(m.line(599).ok());
}

// `mmfeed index --tokenizer`: each sample's text tokens, counted as the Loader encodes it (whom
// they are trusted by: tests/pipeline/balance_test.cc; that they are the Loader's:
// tests/python/data/test_index.py).
TEST_F(IndexTest, TextTokensAreCountedAsTheLoaderEncodes) {
  constexpr const char* kText = R"({"messages": [{"role": "user", "content": "How many tokens is this?"},)"
                                R"( {"role": "assistant", "content": "A few."}]})";
  const std::string source = write("text.jsonl", std::string(kText) + "\n" + kImage + "\n");
  const std::string tokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
  IndexOptions options;
  options.tokenizer = tokenizer;
  options.probe_media = false;
  const IndexSummary s = build_index(source, options).value();
  const DatasetIndex index = open_index(s.path, source).value();
  EXPECT_EQ(index.tokens_key, text_tokens_key(tokenizer, "Qwen2-VL").value());
  // The template's text around the turns: "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n..."
  auto tok = text::Tokenizer::from_file(tokenizer).value();
  const auto c = text::parse_conversation(kText).value();
  const auto encoded = text::encode_conversation(*tok, c, text::ChatTemplate::kQwen2VL, {}, {}, {}).value();
  EXPECT_EQ(index.records[0].text_tokens, encoded.input_ids.size());
  EXPECT_GT(index.records[1].text_tokens, 0u);  // the image's placeholder apart
  EXPECT_EQ(s.text_tokens, index.records[0].text_tokens + index.records[1].text_tokens);
}

// The manifest as read through its index and as read whole: the same samples, text, names and
// CRC-32; the text is read only as asked for.
TEST_F(IndexTest, AManifestOpensFromItsIndexAsItReadsWhole) {
  for (const std::string& text : {std::string("\xEF\xBB\xBF") + kImage + "\n\n" + kVideo + "\n",
                                  std::string("[") + kImage + ",\n " + kVideo + "]"}) {
    const std::string source = write("m.jsonl", text);
    fs::remove(source + ".mmidx");
    const dataset::Manifests whole = dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {}).value();
    ASSERT_TRUE(build_index(source).ok());
    // A limit the text passes no more: the index is read, not the text.
    const dataset::Manifests indexed = dataset::read_manifests({source}, /*max_bytes=*/8, {}).value();
    ASSERT_NE(indexed.files[0].indexed, nullptr);
    EXPECT_TRUE(indexed.files[0].text.empty());
    EXPECT_EQ(indexed.files[0].crc32, whole.files[0].crc32);
    EXPECT_EQ(indexed.files[0].text_size(), whole.files[0].text_size());
    EXPECT_EQ(indexed.files[0].array, whole.files[0].array);
    EXPECT_EQ(indexed.files[0].base_dir, whole.files[0].base_dir);
    ASSERT_EQ(indexed.size(), whole.size());
    EXPECT_TRUE(indexed.held.empty());  // the samples stay in the index
    std::string a, b;
    for (std::size_t i = 0; i < whole.size(); ++i) {
      const dataset::ManifestLine line = indexed.line(i).value();
      EXPECT_EQ(line.offset, whole.held[i].offset);
      EXPECT_EQ(line.number, whole.held[i].number);
      EXPECT_EQ(indexed.where(line), whole.where(whole.held[i]));
      EXPECT_EQ(indexed.text(line, a).value(), whole.text(whole.held[i], b).value());
    }
  }
}

TEST_F(IndexTest, AManifestWhoseIndexDoesNotCheckOutIsRefusedNotRead) {
  const std::string source = write("train.jsonl", std::string(kImage) + "\n" + kVideo + "\n");
  const std::string index = build_index(source).value().path;
  write("train.jsonl", std::string(kVideo) + "\n");
  auto stale = dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {});
  ASSERT_FALSE(stale.ok());
  EXPECT_NE(stale.error().to_string().find("stale"), std::string::npos) << stale.error().to_string();
  EXPECT_NE(stale.error().to_string().find(index), std::string::npos) << stale.error().to_string();
  // `mmfeed index` reads the text itself, whatever index lies beside it.
  ASSERT_TRUE(build_index(source).ok());
  EXPECT_EQ(dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {}).value().size(), 1u);
}

TEST_F(IndexTest, ASampleCutFromItsFileAfterOpeningIsItsErrorNotACrash) {
  const std::string source = write("train.jsonl", std::string(kImage) + "\n" + kVideo + "\n");
  ASSERT_TRUE(build_index(source).ok());
  const dataset::Manifests m = dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {}).value();
  fs::resize_file(source, std::string(kImage).size() + 5);  // cut in place: the open file shrinks
  std::string buffer;
  EXPECT_EQ(m.text(m.line(0).value(), buffer).value(), kImage);
  auto cut = m.text(m.line(1).value(), buffer);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().code(), ErrorCode::kCorruptData);
  EXPECT_NE(cut.error().to_string().find("cut since it was indexed"), std::string::npos) << cut.error().to_string();
}

// Without an index beside it, a manifest is indexed once into the cache_dir: readers racing for
// it build one between them, later ones open it, a changed manifest's is rebuilt there (the
// cache's own). (A compressed manifest, read whole: tests/python/data/test_index.py.)
TEST_F(IndexTest, TheNodeCacheIndexesAManifestOnce) {
  const std::string source = write("train.jsonl", std::string(kImage) + "\n" + kVideo + "\n");
  const dataset::Indexes cache{.use = true, .cache_dir = (dir_ / "cache").string(), .media_root = {}};
  std::vector<std::thread> readers;
  std::atomic<int> built{0}, opened{0};
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      auto m = dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {}, cache);
      if (!m.ok() || m->files[0].indexed == nullptr || m->size() != 2) return;
      ++opened;
      if (m->files[0].index_built) ++built;
    });
  }
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(opened.load(), 4);
  EXPECT_EQ(built.load(), 1);
  EXPECT_FALSE(fs::exists(source + ".mmidx"));  // the source's folder is left as it was
  std::size_t indexes = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "cache")) indexes += e.path().extension() == ".mmidx" ? 1 : 0;
  EXPECT_EQ(indexes, 1u);
  auto again = dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {}, cache).value();
  EXPECT_FALSE(again.files[0].index_built);
  write("train.jsonl", std::string(kVideo) + "\n");  // changed: the cache's index is rebuilt, not refused
  auto changed = dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {}, cache).value();
  EXPECT_TRUE(changed.files[0].index_built);
  EXPECT_EQ(changed.size(), 1u);
}

// The media's facts are their headers' (the decoders' own probes: tested against Pillow, PyAV and
// librosa in their suites), a medium that cannot be read is counted and named (remote media are
// read by their first and last bytes: tests/python/data/test_index.py, over S3 and HTTP), and
// media_root moves where relative references resolve.
TEST_F(IndexTest, MediaFactsAreTheirHeaders) {
  const fs::path corpus = fs::path(MMFEED_TEST_DATA_DIR) / "corpus";
  const auto bytes = [&](const std::string& name) { return read((corpus / name).string()); };
  const auto item = [](const std::string& type, const std::string& ref) {
    return "{\"type\": \"" + type + "\", \"" + type + "\": \"" + ref + "\"}";
  };
  const auto sample = [&](const std::vector<std::string>& items) {
    std::string content;
    for (const std::string& i : items) content += (content.empty() ? "" : ", ") + i;
    return R"({"messages": [{"role": "user", "content": [)" + content +
           R"(]}, {"role": "assistant", "content": "A."}]})" + "\n";
  };
  write("exif6.jpg", bytes("decode/exif6.jpg"));
  write("rgb.png", bytes("decode/rgb.png"));
  write("h264.mp4", bytes("video/h264.mp4"));
  write("tone.wav", bytes("audio/tone.wav"));
  write("not.jpg", bytes("decode/wrong-magic.gif"));
  const std::string source = write("train.jsonl", sample({item("audio", "tone.wav"), item("image", "exif6.jpg"),
                                                          item("video", "h264.mp4"), item("image", "rgb.png")}) +
                                                      sample({item("image", "not.jpg"), item("image", "missing.png")}));
  const IndexSummary s = build_index(source).value();
  EXPECT_EQ(s.media_unreadable, 2u);
  ASSERT_EQ(s.unreadable.size(), 2u);
  EXPECT_NE(s.unreadable[0].find("train.jsonl:2: not.jpg"), std::string::npos) << s.unreadable[0];
  EXPECT_NE(s.unreadable[1].find("missing.png"), std::string::npos) << s.unreadable[1];
  EXPECT_EQ(s.media_not_probed, 0u);
  const DatasetIndex index = open_index(s.path, source).value();
  ASSERT_EQ(index.media.size(), 6u);
  EXPECT_EQ(index.records[1].first_media, 4u);
  // The first sample's: its images in order, its video, its clip.
  const auto image = [&](const std::string& name) {
    const std::string b = bytes(name);
    return vision::probe({reinterpret_cast<const std::uint8_t*>(b.data()), b.size()}).value();
  };
  const vision::ImageInfo exif = image("decode/exif6.jpg"), png = image("decode/rgb.png");
  using Kind = MediaFacts::Kind;
  using Known = MediaFacts::Known;
  const MediaFacts& f0 = index.media[0];
  EXPECT_EQ(f0.kind, Kind::kImage);
  EXPECT_EQ(f0.known, Known::kRead);
  EXPECT_EQ(f0.width, static_cast<std::uint32_t>(exif.upright_width()));
  EXPECT_EQ(f0.height, static_cast<std::uint32_t>(exif.upright_height()));
  EXPECT_NE(exif.width, exif.upright_width());  // the EXIF orientation turns it
  EXPECT_EQ(index.media[1].width, static_cast<std::uint32_t>(png.width));
  const std::string mp4 = bytes("video/h264.mp4");
  const VideoInfo video = vision::probe_video({reinterpret_cast<const std::byte*>(mp4.data()), mp4.size()}, {}).value();
  EXPECT_EQ(index.media[2].kind, Kind::kVideo);
  EXPECT_EQ(index.media[2].width, static_cast<std::uint32_t>(video.width));
  EXPECT_EQ(index.media[2].fps_centi, static_cast<std::uint16_t>(std::lround(video.fps * 100)));
  EXPECT_EQ(index.media[2].duration_ms, static_cast<std::uint32_t>(std::lround(video.duration_s * 1000)));
  const std::string wav = bytes("audio/tone.wav");
  const AudioInfo clip = probe_audio({reinterpret_cast<const std::byte*>(wav.data()), wav.size()}).value();
  EXPECT_EQ(index.media[3].kind, Kind::kAudio);
  EXPECT_GT(index.media[3].duration_ms, 0u);
  EXPECT_EQ(index.media[3].duration_ms, static_cast<std::uint32_t>(std::lround(clip.duration_s * 1000)));
  EXPECT_EQ(index.media[4].known, Known::kUnreadable);
  EXPECT_EQ(index.media[5].known, Known::kUnreadable);
  // Without probing nothing is read; with a media_root the references resolve there.
  const IndexSummary unprobed = build_index(source, {.out = "", .media_root = "", .probe_media = false}).value();
  EXPECT_EQ(unprobed.media_unreadable, 0u);
  EXPECT_EQ(open_index(unprobed.path, source).value().media[0].known, Known::kNotProbed);
  fs::create_directories(dir_ / "sub");
  const std::string moved = write("sub/train.jsonl", sample({item("image", "rgb.png")}));
  EXPECT_EQ(build_index(moved).value().media_unreadable, 1u);
  EXPECT_EQ(build_index(moved, {.out = "", .media_root = dir_.string(), .probe_media = true}).value().media_unreadable,
            0u);
}

TEST_F(IndexTest, ARemoteSourceWithoutOutAndCompressedAndMissingSourcesAreRefused) {
  // A remote manifest's index is written here, where the caller says (no network asked first).
  EXPECT_EQ(build_index("s3://bucket/train.jsonl").error().code(), ErrorCode::kInvalidArgument);
  const std::string gz = write("train.jsonl.gz", std::string("\x1f\x8b\x08\x00", 4) + "rest");
  auto r = build_index(gz);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().to_string().find("compressed"), std::string::npos);
  EXPECT_EQ(build_index((dir_ / "none.jsonl").string()).error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(open_index((dir_ / "none.mmidx").string(), gz).error().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace mmfeed
