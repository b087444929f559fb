// Issue 50: a model is one row. A fictitious model added with add_model() is taken everywhere a
// model name is: the Loader (its images, videos, default template, packed layout), the one-call
// image processor, the video and audio profiles, and the normalization tables.
#include "core/models.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "audio/profile.h"
#include "mmfeed/loader.h"
#include "mmfeed/vision.h"
#include "vision/video_processor.h"

namespace mmfeed {
namespace {

// Qwen3-VL's row under another name, with linear attention as Qwen3.5 has it.
const ModelRow& test_model() {
  static const ModelRow* row = [] {
    ModelRow r = **find_model("qwen3-vl");
    r.name = "test-vl";
    r.linear_attention = true;
    EXPECT_TRUE(add_model(r).ok());
    return *find_model("test-vl");
  }();
  return *row;
}

class ModelTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test_model();
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-models-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string corpus = MMFEED_TEST_DATA_DIR "/corpus/decode/";
    std::ofstream m(dir_ / "manifest.jsonl");
    for (int i = 0; i < 6; ++i) {
      m << R"({"id": "s)" << i << R"(", "messages": [{"role": "user", "content": [{"type": "image", "image": ")"
        << corpus << (i % 2 == 0 ? "baseline.jpg" : "rgb.png") << R"("}, {"type": "text", "text": "what )" << i
        << R"("}]}, {"role": "assistant", "content": "answer )" << i << R"("}]})"
        << "\n";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Every batch of a run, tensor by tensor: name -> bytes.
  std::vector<std::map<std::string, std::string>> run(const std::string& model, std::size_t token_budget) const {
    LoaderConfig c;
    c.manifests = {(dir_ / "manifest.jsonl").string()};
    c.tokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
    c.model = model;
    c.max_pixels = 200000;
    c.batch_size = 2;
    c.workers = 2;
    c.token_budget = token_budget;
    c.mrope = true;
    auto loader = Loader::open(c);
    EXPECT_TRUE(loader.ok()) << loader.error().to_string();
    std::vector<std::map<std::string, std::string>> out;
    while (auto b = (*loader)->next().value()) {
      auto& tensors = out.emplace_back();
      for (const Tensor& t : b->tensors) {
        tensors[t.name].assign(static_cast<const char*>(b->data(t)), t.bytes());
      }
    }
    EXPECT_TRUE((*loader)->errors().empty());
    return out;
  }

  std::filesystem::path dir_;
};

TEST_F(ModelTableTest, AnAddedModelIsFoundByName) {
  EXPECT_EQ((*find_model("test-vl"))->image.patch_size, 16);
  EXPECT_NE(model_names().find("test-vl"), std::string::npos);
  EXPECT_FALSE(add_model(test_model()).ok());  // the name is taken
  const auto unknown = find_model("qwen9-vl");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find("test-vl"), std::string::npos) << unknown.error().message();
}

TEST_F(ModelTableTest, TheLoaderTakesAnAddedModelAsItsRowSays) {
  // Padded: the batches of the row it copies, byte for byte (images, template, positions).
  const auto padded = run("test-vl", 0);
  ASSERT_FALSE(padded.empty());
  EXPECT_EQ(padded, run("qwen3-vl", 0));
  EXPECT_EQ(padded[0].at("pixel_values").size() % (1536 * sizeof(float)), 0u);  // patch 16: 3x2x16x16 a row
  // Packed hf rows: its linear attention adds seq_idx, which qwen3-vl's rows lack.
  const auto packed = run("test-vl", 400);
  const auto plain = run("qwen3-vl", 400);
  ASSERT_EQ(packed.size(), plain.size());
  EXPECT_TRUE(packed[0].count("seq_idx"));
  EXPECT_FALSE(plain[0].count("seq_idx"));
  auto without = packed[0];
  without.erase("seq_idx");
  EXPECT_EQ(without, plain[0]);
}

TEST_F(ModelTableTest, TheOneCallApisAndProfilesTakeAnAddedModel) {
  ImageProcessorOptions o;
  o.model = "test-vl";
  EXPECT_TRUE(ImageProcessor::create(o).ok());
  const auto tables = normalize_tables("test-vl", false, ImageBackend::kPil);
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(tables->patch_size, 16);
  const auto video = vision::video_profile("test-vl");
  ASSERT_TRUE(video.ok());
  EXPECT_EQ(video->recipe, VideoRecipe::kQwen3);
  EXPECT_FALSE(audio::audio_model(test_model()).has_value());
  const auto audio = audio::audio_model("test-vl");  // no audio encoder in its row
  ASSERT_FALSE(audio.ok());
  EXPECT_NE(audio.error().message().find("qwen2.5-omni"), std::string::npos) << audio.error().message();
}

}  // namespace
}  // namespace mmfeed
