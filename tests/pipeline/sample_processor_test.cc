#include "pipeline/sample_processor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <thread>

#include "core/buffer_pool.h"
#include "core/metrics.h"
#include "dataset/manifest.h"
#include "pipeline/config.h"

namespace mmfeed::pipeline {
namespace {

class SampleProcessorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-processor-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream m(dir_ / "manifest.jsonl");
    // An answer after each image: a cut before the second keeps the first answer to train.
    m << R"({"id": "two", "messages": [{"role": "user", "content": [{"type": "image", "image": ")" << kCorpus
      << R"(baseline.jpg"}]}, {"role": "assistant", "content": "one picture"}, {"role": "user", "content": [)"
      << R"({"type": "text", "text": "and"}, {"type": "image", "image": ")" << kCorpus
      << R"(rgb.png"}]}, {"role": "assistant", "content": "two pictures"}]})"
      << "\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LoaderConfig config(std::size_t max_length) const {
    LoaderConfig c;
    c.manifests = {(dir_ / "manifest.jsonl").string()};
    c.tokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
    c.max_length = max_length;
    c.truncation = Truncation::kTruncate;
    return c;
  }

  // The one sample processed with `tokenizer`, its media bytes read from the corpus; `before`
  // runs on this thread while process() runs on another.
  std::unique_ptr<Work> process(const LoaderConfig& c, TokenizerFuture tokenizer, core::MetricsRegistry& metrics,
                                const std::function<void()>& before = {}) {
    const Settings settings = check_config(c).value();
    const dataset::Manifests manifests = dataset::read_manifests(c.manifests, c.max_manifest_bytes, {}).value();
    const SampleProcessor processor(settings, manifests, std::move(tokenizer), nullptr, metrics, nullptr);
    std::unique_ptr<Work> w = processor.prepare(0, 0, 0);
    EXPECT_FALSE(w->error);
    for (std::size_t i = 0; i < w->media.size(); ++i) {
      std::ifstream in(w->media[i].uri.path, std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      EXPECT_FALSE(bytes.empty()) << w->media[i].to_string();
      core::Buffer fetched = pool_.acquire(bytes.size());
      std::memcpy(fetched.data(), bytes.data(), bytes.size());
      w->receive(i, std::move(fetched));
    }
    std::thread worker([&] { processor.process(*w, /*defer_images=*/false); });
    if (before) before();
    worker.join();
    return w;
  }

  static constexpr const char* kCorpus = MMFEED_TEST_DATA_DIR "/corpus/decode/";
  std::filesystem::path dir_;
  core::BufferPool pool_;
};

// A sample processed while the tokenizer is still loading has its media decoded first; with
// truncation dropping its second image, it is the sample a loaded tokenizer gives, byte for byte.
TEST_F(SampleProcessorTest, MediaDecodedWhileTheTokenizerLoadsGiveTheSameSample) {
  const TokenizerFuture loaded = load_tokenizer(config(0).tokenizer);
  ASSERT_TRUE(loaded.get().ok());
  core::MetricsRegistry full_metrics;
  const std::unique_ptr<Work> full = process(config(0), loaded, full_metrics);
  ASSERT_FALSE(full->error) << full->error->reason;
  ASSERT_EQ(full->grids.size(), 2u);
  // Room up to the second image's last pad: truncation keeps the first image only.
  constexpr std::int32_t kImagePad = 151655;
  const auto last_pad = std::find(full->input_ids.rbegin(), full->input_ids.rend(), kImagePad);
  ASSERT_NE(last_pad, full->input_ids.rend());
  const auto max_length = static_cast<std::size_t>(std::distance(last_pad, full->input_ids.rend()) - 1);
  core::MetricsRegistry ready_metrics;
  const std::unique_ptr<Work> ready = process(config(max_length), loaded, ready_metrics);
  ASSERT_FALSE(ready->error) << ready->error->reason;
  ASSERT_EQ(ready->grids.size(), 1u);
  ASSERT_EQ(ready->resized.size(), 1u);

  std::promise<Result<std::shared_ptr<const LoadedTokenizer>>> later;
  core::MetricsRegistry metrics;
  bool decoded_before_the_tokenizer = false;
  const std::unique_ptr<Work> w = process(config(max_length), later.get_future().share(), metrics, [&] {
    // The tokenizer is given only once the worker has decoded the media (or after a minute).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (metrics.histogram("loader.decode_media_ns").snapshot().count == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    decoded_before_the_tokenizer = metrics.histogram("loader.decode_media_ns").snapshot().count == 1;
    later.set_value(loaded.get());
  });
  EXPECT_TRUE(decoded_before_the_tokenizer);
  ASSERT_FALSE(w->error) << w->error->reason;
  EXPECT_EQ(w->input_ids, ready->input_ids);
  EXPECT_EQ(w->labels, ready->labels);
  EXPECT_EQ(w->mrope, ready->mrope);
  ASSERT_EQ(w->grids.size(), 1u);
  EXPECT_EQ(w->grids[0].rows(), ready->grids[0].rows());
  ASSERT_EQ(w->resized.size(), 1u);  // the second image, decoded, was dropped with its tokens
  EXPECT_TRUE(std::equal(w->resized[0].image.pixels.begin(), w->resized[0].image.pixels.end(),
                         ready->resized[0].image.pixels.begin(), ready->resized[0].image.pixels.end()));
  EXPECT_EQ(w->bytes.held(), 0);  // every fetched byte released
}

}  // namespace
}  // namespace mmfeed::pipeline
