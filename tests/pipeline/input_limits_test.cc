// Issue 31: hostile inputs sized against their limits before memory or time is spent on them,
// and refused naming the real cause: a resume state's positions, a video's frame count, an image
// whose header is a decompression bomb under packing, a manifest over max_manifest_bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/buffer_pool.h"
#include "core/metrics.h"
#include "dataset/manifest.h"
#include "pipeline/config.h"
#include "pipeline/resume_state.h"
#include "pipeline/sample_processor.h"

namespace mmfeed::pipeline {
namespace {

// `n` one-line samples, held in memory as read_manifests would hold them.
dataset::Manifests manifests_of(std::size_t n) {
  dataset::Manifests m;
  dataset::Manifest file;
  file.name = "memory.jsonl";
  for (std::size_t i = 0; i < n; ++i) {
    const std::string line = "{\"id\": \"s" + std::to_string(i) + "\"}";
    m.held.push_back({file.text.size(), static_cast<std::uint32_t>(line.size()), 0, i + 1});
    file.text += line + "\n";
  }
  file.line_count = n;
  m.files.push_back(std::move(file));
  return m;
}

// Issue 31, finding 7: a position past the old rank's epoch was found only after the resharded
// order had counted up to it, one step per position (1e11: 30 s on one core). At 2^62 counting
// up would take centuries: code that counts first never answers, and the test's timeout fails it.
TEST(ResumeLimitsTest, OldPositionsPastTheOldRanksEpochAreRefusedBeforeTheOrderIsBuilt) {
  const dataset::Manifests manifests = manifests_of(5);
  LoaderConfig config;
  config.manifests = {"memory.jsonl"};
  LoaderState state;
  state.old_world_size = 2;
  state.old_positions = {std::uint64_t{1} << 62, 0};
  const auto r = start_state(config, manifests, manifests.size(), state);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("old rank 0"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("4611686018427387904"), std::string::npos) << r.error().message();
}

// Issue 31, finding 7: reshard() took a position of 10**12 over a run of 10 samples.
TEST(ResumeLimitsTest, ReshardRefusesAPositionPastTheOldRanksEpoch) {
  LoaderConfig config;
  config.world_size = 2;
  const Fingerprint fingerprint = fingerprint_of(config, manifests_of(10), 10);
  std::vector<LoaderState> old(2);
  for (int r = 0; r < 2; ++r) {
    old[static_cast<std::size_t>(r)].rank = r;
    old[static_cast<std::size_t>(r)].world_size = 2;
    old[static_cast<std::size_t>(r)].position = 5;  // each old rank's whole epoch: 10 over 2
    old[static_cast<std::size_t>(r)].fingerprint = fingerprint;
  }
  ASSERT_TRUE(LoaderState::reshard(old, 0, 3).ok());
  old[1].position = 1'000'000'000'000;
  const auto r = LoaderState::reshard(old, 0, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("1000000000000"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("5 samples"), std::string::npos) << r.error().message();
}

class SampleLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-input-limits-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A manifest of the one `line`, for the qwen3-vl profile.
  LoaderConfig config(const std::string& line) const {
    std::ofstream(dir_ / "manifest.jsonl") << line << "\n";
    LoaderConfig c;
    c.manifests = {(dir_ / "manifest.jsonl").string()};
    c.tokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
    c.model = "qwen3-vl";
    return c;
  }

  // The manifest's one sample prepared, its media read from disk, and processed (`defer`: the
  // media left undecoded, as under packing).
  std::unique_ptr<Work> process(const LoaderConfig& c, bool defer) {
    const Settings settings = check_config(c).value();
    const dataset::Manifests manifests = dataset::read_manifests(c.manifests, c.max_manifest_bytes, {}).value();
    core::MetricsRegistry metrics;
    const SampleProcessor processor(settings, manifests, load_tokenizer(c.tokenizer), nullptr, metrics, nullptr);
    std::unique_ptr<Work> w = processor.prepare(0, 0, 0);
    if (w->error) return w;
    for (std::size_t i = 0; i < w->media.size(); ++i) {
      std::ifstream in(w->media[i].uri.path, std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      core::Buffer fetched = pool_.acquire(bytes.size());
      std::memcpy(fetched.data(), bytes.data(), bytes.size());
      w->receive(i, std::move(fetched));
    }
    processor.process(*w, defer);
    return w;
  }

  static std::string sample(const std::string& item) {
    return R"({"id": "s1", "messages": [{"role": "user", "content": [)" + item +
           R"(, {"type": "text", "text": "what"}]}, {"role": "assistant", "content": "this"}]})";
  }

  std::filesystem::path dir_;
  core::BufferPool pool_;
};

// Issue 31, finding 12b: under packing the bomb's grid (planned at max_pixels) was tokenized and
// refused as "more tokens than token_budget", stage text.
TEST_F(SampleLimitsTest, ADecompressionBombHeaderIsAnImageErrorUnderPacking) {
  LoaderConfig c =
      config(sample(R"({"type": "image", "image": ")" MMFEED_TEST_DATA_DIR R"(/corpus/decode/huge-declared.png"})"));
  c.token_budget = 1024;
  const std::unique_ptr<Work> w = process(c, /*defer=*/true);
  ASSERT_TRUE(w->error);
  EXPECT_EQ(w->error->stage, "image") << w->error->reason;
  EXPECT_EQ(w->error->code, ErrorCode::kResourceExhausted);
  EXPECT_NE(w->error->reason.find("100000x100000"), std::string::npos) << w->error->reason;
}

// Issue 31, finding 4: nframes 1e9 listed its frames (and copies of them) before the byte budget
// refused the sample; the count alone is checked against max_buffered_bytes first.
TEST_F(SampleLimitsTest, AVideosFrameCountIsCheckedAgainstTheByteBudgetBeforeItsPlan) {
  const LoaderConfig c = config(
      sample(R"({"type": "video", "video": ")" MMFEED_TEST_DATA_DIR R"(/corpus/video/h264.mp4", "nframes": 1000000})"));
  const std::unique_ptr<Work> w = process(c, /*defer=*/false);
  ASSERT_TRUE(w->error);
  EXPECT_EQ(w->error->stage, "video");
  EXPECT_EQ(w->error->code, ErrorCode::kResourceExhausted);
  EXPECT_NE(w->error->reason.find("1000000 frames"), std::string::npos) << w->error->reason;
  EXPECT_NE(w->error->reason.find("max_buffered_bytes"), std::string::npos) << w->error->reason;
  EXPECT_TRUE(w->video_plans.empty());
}

// Issue 31, finding 12d: a plain manifest over the limit was refused naming max_object_bytes.
TEST_F(SampleLimitsTest, APlainManifestOverTheLimitNamesMaxManifestBytes) {
  const LoaderConfig c = config(sample(R"({"type": "text", "text": "padding"})"));
  const auto r = dataset::read_manifests(c.manifests, 64, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message().find("max_manifest_bytes (64 bytes)"), std::string::npos) << r.error().message();
  EXPECT_EQ(r.error().to_string().find("max_object_bytes"), std::string::npos) << r.error().to_string();
}

}  // namespace
}  // namespace mmfeed::pipeline
