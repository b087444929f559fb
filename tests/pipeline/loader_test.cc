#include "mmfeed/loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "vision/patchify.h"
#include "vision/profile.h"

namespace mmfeed {
namespace {

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-loader-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string corpus = MMFEED_TEST_DATA_DIR "/corpus/decode/";
    std::ofstream m(dir_ / "manifest.jsonl");
    for (int i = 0; i < 30; ++i) {
      const char* image = i % 3 == 0 ? "baseline.jpg" : i % 3 == 1 ? "rgb.png" : "lossless.webp";
      m << R"({"id": "s)" << i << R"(", "messages": [{"role": "user", "content": [{"type": "image", "image": ")"
        << corpus << image << R"("}, {"type": "text", "text": "what )" << i
        << R"("}]}, {"role": "assistant", "content": "answer )" << i << R"("}]})"
        << "\n";
    }
    m << R"({"id": "bad", "messages": [{"role": "user", "content": [{"type": "image", "image": ")" << corpus
      << R"(truncated-baseline.jpg"}]}]})"
      << "\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LoaderConfig config() const {
    LoaderConfig c;
    c.manifests = {(dir_ / "manifest.jsonl").string()};
    c.tokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
    c.batch_size = 4;
    c.workers = 3;
    c.prefetch_batches = 2;
    c.epochs = 2;
    return c;
  }

  std::filesystem::path dir_;
};

TEST_F(LoaderTest, EverySampleDeliveredOrReportedAcrossEpochs) {
  auto loader = Loader::open(config()).value();
  std::size_t samples = 0;
  while (auto b = loader->next().value()) {
    samples += b->sample_ids.size();
    const Tensor* ids = b->find("input_ids");
    ASSERT_NE(ids, nullptr);
    EXPECT_EQ(static_cast<std::size_t>(ids->shape[0]), b->sample_ids.size());
  }
  EXPECT_EQ(samples, 60u);
  const auto errors = loader->errors();
  ASSERT_EQ(errors.size(), 2u);  // the broken sample, once per epoch
  EXPECT_EQ(errors[0].sample_id, "bad");
  EXPECT_EQ(errors[0].stage, "image");
}

// Issue 17: on_error = "fail" reported every failure as corrupt data; the sample's own code stays.
TEST_F(LoaderTest, FailingOnErrorKeepsTheSamplesErrorCode) {
  {
    std::ofstream m(dir_ / "missing.jsonl");
    m << R"({"id": "gone", "messages": [{"role": "user", "content": [{"type": "image", "image": "nope.png"}]}]})"
      << "\n";
  }
  LoaderConfig c = config();
  c.manifests = {(dir_ / "missing.jsonl").string()};
  c.on_error = OnError::kFail;
  auto loader = Loader::open(c).value();
  const auto r = loader->next();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kNotFound) << r.error().to_string();
  ASSERT_EQ(loader->errors().size(), 1u);
  EXPECT_EQ(loader->errors()[0].code, ErrorCode::kNotFound);
  c = config();  // the truncated image: corrupt data
  c.on_error = OnError::kFail;
  c.shuffle = false;
  auto corrupt = Loader::open(c).value();
  Result<std::optional<Batch>> last = std::optional<Batch>();
  while ((last = corrupt->next()).ok() && last->has_value()) {
  }
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.error().code(), ErrorCode::kCorruptData);
}

TEST_F(LoaderTest, ClosingMidRunReturnsPromptly) {
  for (int round = 0; round < 5; ++round) {
    auto loader = Loader::open(config()).value();
    ASSERT_TRUE(loader->next().value().has_value());
    ASSERT_TRUE(loader->close().ok());
    // Closed before the end of the data: not mistaken for the end (issue 15).
    const auto after = loader->next();
    ASSERT_FALSE(after.ok());
    EXPECT_EQ(after.error().code(), ErrorCode::kCancelled);
  }
}

TEST_F(LoaderTest, ResumeContinuesWhereTheStateSays) {
  std::vector<std::string> all;
  {
    auto loader = Loader::open(config()).value();
    while (auto b = loader->next().value()) all.insert(all.end(), b->sample_ids.begin(), b->sample_ids.end());
  }
  std::vector<std::string> got;
  LoaderState state;
  {
    auto loader = Loader::open(config()).value();
    for (int i = 0; i < 5; ++i) {
      std::optional<Batch> b = loader->next().value();
      ASSERT_TRUE(b.has_value());
      for (const std::string& id : b.value().sample_ids) got.push_back(id);
    }
    state = loader->state();
  }
  auto resumed = Loader::open(config(), LoaderState::from_json(state.to_json()).value()).value();
  while (auto b = resumed->next().value()) got.insert(got.end(), b->sample_ids.begin(), b->sample_ids.end());
  EXPECT_EQ(got, all);
}

TEST_F(LoaderTest, PackingDecodesRowByRowAndMatchesTheSerialMode) {
  // Rows planned from header-probed token counts, images decoded on the pool row by row; the
  // serial mode decodes the same rows inline and must deliver the same batches.
  auto run = [&](Mode mode, bool close_early) {
    LoaderConfig c = config();
    c.token_budget = 150;
    c.pack_window = 10;
    c.mode = mode;
    auto loader = Loader::open(c).value();
    std::vector<std::vector<std::string>> rows;
    for (;;) {
      auto b = loader->next();
      if (!b.ok()) {  // closed early
        EXPECT_TRUE(close_early);
        EXPECT_EQ(b.error().code(), ErrorCode::kCancelled);
        break;
      }
      if (!b->has_value()) break;
      rows.push_back((*b)->sample_ids);
      if (close_early && rows.size() == 2) {
        EXPECT_TRUE(loader->close().ok());  // tasks still queued must not dangle
      }
    }
    EXPECT_EQ(loader->errors().size(), close_early ? loader->errors().size() : 2u);  // "bad", both epochs
    return rows;
  };
  const auto concurrent = run(Mode::kConcurrent, false);
  EXPECT_EQ(concurrent, run(Mode::kSerial, false));
  std::size_t samples = 0;
  for (const auto& r : concurrent) samples += r.size();
  EXPECT_EQ(samples, 60u);
  EXPECT_GT(concurrent.size(), 6u);  // packing took effect: several rows per window of 10
  for (int round = 0; round < 3; ++round) run(Mode::kConcurrent, true);
}

// pixels = bfloat16 / uint8 hold the float32 run's values in fewer bytes: bfloat16 each value
// rounded to nearest even; uint8 the bytes whose table value (over the temporal repeat) is each
// value. Every other tensor is the same, byte for byte, padded and packed.
TEST_F(LoaderTest, PixelTypesHoldTheFloat32ValuesInFewerBytes) {
  const vision::ModelProfile profile = vision::model_profile("qwen2-vl").value();
  const vision::NormalizeTable table(profile);
  const std::size_t T = static_cast<std::size_t>(profile.temporal_patch_size);
  const std::size_t area = static_cast<std::size_t>(profile.patch_size * profile.patch_size);
  for (const std::size_t token_budget : {std::size_t{0}, std::size_t{150}}) {
    auto run = [&](Pixels pixels) {
      LoaderConfig c = config();
      c.epochs = 1;
      c.token_budget = token_budget;
      c.pack_window = 10;
      c.pixels = pixels;
      auto loader = Loader::open(c).value();
      std::vector<Batch> out;
      while (auto b = loader->next().value()) out.push_back(std::move(*b));
      return out;
    };
    const auto f32 = run(Pixels::kFloat32), bf16 = run(Pixels::kBFloat16), u8 = run(Pixels::kUInt8);
    ASSERT_EQ(bf16.size(), f32.size());
    ASSERT_EQ(u8.size(), f32.size());
    std::size_t checked = 0;
    for (std::size_t i = 0; i < f32.size(); ++i) {
      EXPECT_EQ(bf16[i].sample_ids, f32[i].sample_ids);
      EXPECT_EQ(u8[i].sample_ids, f32[i].sample_ids);
      for (const Tensor& t : f32[i].tensors) {
        const Tensor* b = bf16[i].find(t.name);
        const Tensor* u = u8[i].find(t.name);
        ASSERT_TRUE(b != nullptr && u != nullptr) << t.name;
        if (t.name != "pixel_values") {
          ASSERT_EQ(b->bytes(), t.bytes());
          EXPECT_EQ(std::memcmp(bf16[i].data(*b), f32[i].data(t), t.bytes()), 0) << t.name;
          EXPECT_EQ(std::memcmp(u8[i].data(*u), f32[i].data(t), t.bytes()), 0) << t.name;
          continue;
        }
        ASSERT_EQ(b->dtype, Tensor::DType::kBFloat16);
        ASSERT_EQ(u->dtype, Tensor::DType::kUInt8);
        const std::size_t rows = static_cast<std::size_t>(t.shape[0]), width = static_cast<std::size_t>(t.shape[1]);
        ASSERT_EQ(b->shape, t.shape);
        ASSERT_EQ(u->shape, (std::vector<std::int64_t>{t.shape[0], static_cast<std::int64_t>(3 * area)}));
        ASSERT_EQ(width, 3 * T * area);
        const auto* values = static_cast<const float*>(f32[i].data(t));
        const auto* words = static_cast<const std::uint16_t*>(bf16[i].data(*b));
        const auto* bytes = static_cast<const std::uint8_t*>(u8[i].data(*u));
        for (std::size_t r = 0; r < rows; ++r) {
          for (std::size_t c = 0; c < 3; ++c) {
            for (std::size_t k = 0; k < area; ++k) {
              const float expected = table.value[c][bytes[r * 3 * area + c * area + k]];
              for (std::size_t tt = 0; tt < T; ++tt) {
                const std::size_t col = (c * T + tt) * area + k;
                ASSERT_EQ(values[r * width + col], expected) << "row " << r << " column " << col;
                ASSERT_EQ(words[r * width + col], vision::to_bfloat16(expected)) << "row " << r << " column " << col;
              }
            }
          }
        }
        checked += rows;
      }
    }
    EXPECT_GT(checked, 0u);
  }
}

TEST_F(LoaderTest, BadConfigurationNamesTheField) {
  LoaderConfig c = config();
  c.batch_size = 0;
  auto r = Loader::open(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().context(), "LoaderConfig.batch_size");
}

// Loaders opened from one LoaderInputs deliver what loaders that read their own deliver; the
// manifests are the snapshot read, and inputs read for other options are refused by field.
TEST_F(LoaderTest, LoadersSharingInputsDeliverWhatTheirOwnWould) {
  auto ids_of = [](Loader& loader) {
    std::vector<std::string> ids;
    while (auto b = loader.next().value()) ids.insert(ids.end(), b->sample_ids.begin(), b->sample_ids.end());
    return ids;
  };
  const std::shared_ptr<const LoaderInputs> inputs = LoaderInputs::read(config()).value();
  const std::vector<std::string> own = ids_of(*Loader::open(config()).value());
  EXPECT_EQ(ids_of(*Loader::open(config(), std::nullopt, inputs).value()), own);
  EXPECT_EQ(ids_of(*Loader::open(config(), std::nullopt, inputs).value()), own);
  EXPECT_EQ(Loader::epoch_sizes(config(), std::nullopt, inputs).value(), Loader::epoch_sizes(config()).value());

  {  // the file grows: a loader from the inputs still sees the 31 lines read
    std::ofstream m(dir_ / "manifest.jsonl", std::ios::app);
    m << R"({"id": "late", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})"
      << "\n";
  }
  EXPECT_EQ(ids_of(*Loader::open(config(), std::nullopt, inputs).value()), own);
  EXPECT_EQ(ids_of(*Loader::open(config()).value()).size(), own.size() + 2);

  LoaderConfig other = config();
  other.tokenizer = (dir_ / "tokenizer.json").string();
  auto refused = Loader::open(other, std::nullopt, inputs);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().context(), "LoaderConfig.tokenizer");
  other = config();
  other.manifests.push_back(other.manifests[0]);
  EXPECT_EQ(Loader::epoch_sizes(other, std::nullopt, inputs).error().context(), "LoaderConfig.manifests");
  // Options the inputs do not depend on may differ.
  other = config();
  other.batch_size = 6;
  other.epochs = 1;
  EXPECT_EQ(ids_of(*Loader::open(other, std::nullopt, inputs).value()).size(), own.size() / 2);
}

TEST_F(LoaderTest, InputsThatCannotBeReadAreAnError) {
  LoaderConfig c = config();
  c.tokenizer = (dir_ / "no-tokenizer.json").string();
  EXPECT_FALSE(LoaderInputs::read(c).ok());
  c = config();
  c.manifests = {(dir_ / "no-manifest.jsonl").string()};
  auto r = LoaderInputs::read(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().to_string().find("no-manifest.jsonl"), std::string::npos) << r.error().to_string();
}

}  // namespace
}  // namespace mmfeed
