// The public C++ API alone: this test is built against include/mmfeed/ and the `mmfeed` library
// without the engine's internal headers (it does not link mmfeed_internal), so what a user of
// the library needs — a loader, its options by name and from files, the image processor, the
// tokenizer and chat encoding, fetching and signing — is public. (The Python module and the CLI
// are built the same way; their tests check the outputs against the references.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "mmfeed/audio.h"
#include "mmfeed/config_file.h"
#include "mmfeed/loader.h"
#include "mmfeed/loader_options.h"
#include "mmfeed/storage.h"
#include "mmfeed/system.h"
#include "mmfeed/text.h"
#include "mmfeed/vision.h"

namespace mmfeed {
namespace {

TEST(PublicApiTest, ALoaderOpensFromNamedOptionsAndDeliversABatch) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mmfeed-public-api-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream m(dir / "manifest.jsonl");
    for (int i = 0; i < 3; ++i) {
      m << R"({"id": "s)" << i << R"(", "messages": [{"role": "user", "content": "Say )" << i
        << R"("}, {"role": "assistant", "content": "ok"}]})"
        << "\n";
    }
  }
  LoaderConfig config;
  ASSERT_TRUE(set_loader_option(config, "manifests", (dir / "manifest.jsonl").string()).ok());
  ASSERT_TRUE(set_loader_option(config, "tokenizer", MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json").ok());
  ASSERT_TRUE(set_loader_option(config, "batch_size", "3").ok());
  ASSERT_TRUE(set_loader_option(config, "shuffle", "false").ok());
  auto loader = Loader::open(config);
  ASSERT_TRUE(loader.ok()) << loader.error().to_string();
  auto batch = (*loader)->next();
  ASSERT_TRUE(batch.ok() && batch->has_value());
  EXPECT_EQ((*batch)->sample_ids, (std::vector<std::string>{"s0", "s1", "s2"}));
  const Tensor* ids = (*batch)->find("input_ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->shape[0], 3);
  EXPECT_GE((*batch)->buffer_capacity(), ids->bytes());
  EXPECT_EQ((*batch)->data(*ids), static_cast<const void*>((*batch)->buffer() + ids->offset));
  std::filesystem::remove_all(dir);
}

// A scratch directory of this process, removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

constexpr const char* kTokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";

TEST(PublicApiTest, TheTokenizerEncodesDecodesAndNamesAMissingFile) {
  auto tok = Tokenizer::from_file(kTokenizer);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const std::vector<std::string> texts{"Hello world", "中文 and العربية", "  many   spaces"};
  auto batch = tok->encode_batch(texts, 3);
  ASSERT_TRUE(batch.ok());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto ids = tok->encode(texts[i]);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ((*batch)[i], *ids);
    EXPECT_EQ(tok->decode(*ids), texts[i]);
  }
  const Tokenizer copy = *tok;  // a handle: both share the loaded tokenizer
  EXPECT_EQ(copy.vocab_size(), tok->vocab_size());
  EXPECT_TRUE(tok->token_to_id("<|image_pad|>").has_value());
  const std::vector<std::string> bad{"ok", std::string("\xff")};
  auto refused = tok->encode_batch(bad, 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().to_string().find("text 1"), std::string::npos) << refused.error().to_string();
  auto missing = Tokenizer::from_file("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
}

TEST(PublicApiTest, AConversationRendersAndEncodesWithItsImagePadsAndLabels) {
  const std::string line = R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"}, )"
                           R"({"type": "text", "text": "What is it?"}]}, {"role": "assistant", "content": "A cat."}]})";
  auto text = render_chat(line, {.chat_template = "qwen2-vl"});
  ASSERT_TRUE(text.ok()) << text.error().to_string();
  EXPECT_NE(text->find("<|vision_start|><|image_pad|><|vision_end|>What is it?"), std::string::npos) << *text;
  auto tok = Tokenizer::from_file(kTokenizer);
  ASSERT_TRUE(tok.ok());
  EncodeOptions o;
  o.image_grids = {{1, 4, 6}};  // 24 patches: 6 tokens after the 2 x 2 merge
  auto s = encode_conversation(*tok, line, o);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const std::int32_t pad = *tok->token_to_id("<|image_pad|>");
  EXPECT_EQ(std::count(s->input_ids.begin(), s->input_ids.end(), pad), 6);
  EXPECT_EQ(s->position_ids.size(), 3 * s->input_ids.size());
  // Only the reply is trained: "A cat." + <|im_end|> + "\n".
  std::vector<std::int32_t> trained;
  for (std::int32_t label : s->labels) {
    if (label != -100) trained.push_back(label);
  }
  EXPECT_EQ(tok->decode(trained), "A cat.<|im_end|>\n");
  o.image_grids = {};
  EXPECT_FALSE(encode_conversation(*tok, line, o).ok());  // the image needs its grid
}

TEST(PublicApiTest, TheImageProcessorPlansAndWritesRowsForPixelsAndRefusesBadInput) {
  auto proc = ImageProcessor::create({.model = "qwen2-vl", .output = Pixels::kUInt8, .threads = 2});
  ASSERT_TRUE(proc.ok()) << proc.error().to_string();
  std::vector<std::uint8_t> gray(56 * 84, 200);
  std::vector<std::uint8_t> rgb(56 * 56 * 3, 10);
  const std::vector<ImageInput> inputs{{.pixels = gray.data(), .width = 84, .height = 56, .channels = 1},
                                       {.pixels = rgb.data(), .width = 56, .height = 56, .channels = 3}};
  auto rows = proc->process(inputs);
  ASSERT_TRUE(rows.ok()) << rows.error().to_string();
  ASSERT_EQ(rows->grids.size(), 2u);
  EXPECT_EQ(rows->grids[0], (GridThw{1, 4, 6}));
  EXPECT_EQ(rows->grids[1], (GridThw{1, 4, 4}));
  EXPECT_EQ(rows->rows, 40u);
  EXPECT_EQ(rows->row_elements, 588u);  // uint8 rows: 3 x 14 x 14 (no temporal repeat)
  const auto* bytes = static_cast<const std::uint8_t*>(rows->data);
  EXPECT_EQ(bytes[0], 200);            // the gray image's first row, resized uniform
  EXPECT_EQ(bytes[24 * 588 + 5], 10);  // the second image's rows follow the first's
  auto plan = proc->plan(56, 84);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(*plan, (GridThw{1, 4, 6}));
  const std::vector<std::uint8_t> junk{1, 2, 3, 4};
  const std::vector<ImageInput> bad{{.pixels = rgb.data(), .width = 56, .height = 56, .channels = 3},
                                    {.encoded = junk}};
  auto refused = proc->process(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().to_string().find("image 1"), std::string::npos) << refused.error().to_string();
  EXPECT_FALSE(ImageProcessor::create({.model = "llava"}).ok());
  std::vector<std::uint8_t> out(4 * 4 * 3);
  EXPECT_FALSE(resize_image(rgb.data(), 56, 56, 5, out.data(), 4, 4, ResizeFilter::kBicubic).ok());
  ASSERT_TRUE(resize_image(rgb.data(), 56, 56, 3, out.data(), 4, 4, ResizeFilter::kBicubic).ok());
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](std::uint8_t v) { return v == 10; }));
}

TEST(PublicApiTest, NormalizeTablesHoldTheModelsMeanAndStd) {
  auto t = normalize_tables("qwen2-vl");
  ASSERT_TRUE(t.ok());
  // CLIP's mean and std (Qwen2-VL's image processor): byte 255 of the red channel.
  EXPECT_NEAR(t->values[0][255], (1.0f - 0.48145466f) / 0.26862954f, 1e-5f);
  EXPECT_EQ(t->patch_size, 14);
  EXPECT_FALSE(normalize_tables("nope").ok());
}

TEST(PublicApiTest, TheAudioProcessorPadsClipsAsTheModelAndNamesABadOne) {
  std::vector<float> tone(16000);
  for (std::size_t i = 0; i < tone.size(); ++i)
    tone[i] = 0.5f * static_cast<float>(std::sin(0.1 * static_cast<double>(i)));
  auto proc = AudioProcessor::create({.model = "qwen3-omni"});
  ASSERT_TRUE(proc.ok()) << proc.error().message();
  AudioInput clips[2];
  clips[0].samples = tone;
  clips[1].samples = std::span(tone).first(8000);
  auto f = proc->process(clips);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->frames, 100u);  // padded to the longest clip: 1 s
  EXPECT_EQ(f->features.size(), 2u * 128u * 100u);
  EXPECT_EQ(f->valid_frames, (std::vector<std::int64_t>{100, 50}));
  EXPECT_EQ(f->tokens, (std::vector<std::int64_t>{13, 7}));
  EXPECT_EQ(std::count(f->mask.begin(), f->mask.begin() + 100, 1), 100);
  const std::byte garbage[16] = {};
  clips[1].encoded = garbage;
  auto bad = proc->process(clips);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message().rfind("audio 1: ", 0), 0u) << bad.error().message();
  EXPECT_FALSE(AudioProcessor::create({.model = "qwen2-vl"}).ok());
}

TEST(PublicApiTest, AConfigFileSetsOptionsAndSourcesAsTheCliReadsIt) {
  const ScratchDir dir("mmfeed-config");
  {
    std::ofstream f(dir.path() / "run.toml");
    f << "batch-size = 16\nprefetch = 3\n[[sources]]\nmanifest = \"a.jsonl\"\nweight = 0.7\n"
         "[[sources]]\nmanifest = \"b.jsonl\"\nweight = 0.3\n";
  }
  LoaderConfig c;
  ASSERT_TRUE(read_loader_config(c, (dir.path() / "run.toml").string()).ok());
  EXPECT_EQ(c.batch_size, 16u);
  EXPECT_EQ(c.prefetch_batches, 3u);
  EXPECT_EQ(c.manifests, (std::vector<std::string>{"a.jsonl", "b.jsonl"}));
  EXPECT_EQ(c.weights, (std::vector<double>{0.7, 0.3}));
  EXPECT_EQ(changed_options_json(c),
            R"({"manifests":["a.jsonl","b.jsonl"],"weights":[0.69999999999999996,0.29999999999999999],)"
            R"("batch_size":16,"prefetch_batches":3})");
  {
    std::ofstream f(dir.path() / "bad.json");
    f << R"({"batch_size": 4, "frobnicate": 1})";
  }
  const Status bad = read_loader_config(c, (dir.path() / "bad.json").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().to_string().find("unknown option --frobnicate"), std::string::npos);
  EXPECT_NE(bad.error().to_string().find("bad.json"), std::string::npos);
  EXPECT_EQ(loader_option_name("inflight"), "fetch_inflight");
  EXPECT_TRUE(apply_loader_option(c, "token-budget", "4096").ok());
  EXPECT_EQ(c.token_budget, 4096u);
}

TEST(PublicApiTest, AFetchJobFetchesEveryObjectAndReportsEachFailureByName) {
  const ScratchDir dir("mmfeed-fetch");
  const std::string a = (dir.path() / "a.bin").string(), b = (dir.path() / "b.bin").string();
  std::ofstream(a) << "first object";
  std::ofstream(b) << "second";
  FetchJob job;
  job.uris = {a, b, (dir.path() / "missing.bin").string()};
  job.repeat = 2;
  std::vector<std::string> digests;
  auto report = fetch_objects(job, [&](const FetchedObject& o) {
    digests.push_back(sha256_hex({reinterpret_cast<const char*>(o.data.data()), o.data.size()}));
  });
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  EXPECT_EQ(report->objects, 6u);
  EXPECT_EQ(report->ok, 4u);
  EXPECT_EQ(report->bytes, 2u * (12 + 6));
  EXPECT_EQ(report->failed, 2u);
  EXPECT_EQ(report->errors_by_kind.at("not_found"), 2);
  ASSERT_EQ(report->failures.size(), 2u);
  EXPECT_NE(report->failures[0].message.find("missing.bin"), std::string::npos);
  EXPECT_EQ(std::count(digests.begin(), digests.end(), sha256_hex("second")), 2);
  job.uris = {"s3://"};
  EXPECT_FALSE(fetch_objects(job).ok());  // a malformed URI: the job's error
}

TEST(PublicApiTest, SigV4SignsAsAwsDocumentsAndTheMachineReportsItsCpus) {
  // AWS's S3 SigV4 example: GET /test.txt with Range bytes=0-9 at 20130524T000000Z.
  const SigV4Signature s = sign_request_v4({.host = "examplebucket.s3.amazonaws.com",
                                            .path = "/test.txt",
                                            .headers = {{"range", "bytes=0-9"}},
                                            .payload_hash = sha256_hex(""),
                                            .access_key = "AKIAIOSFODNN7EXAMPLE",
                                            .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                                            .amz_date = "20130524T000000Z"});
  EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_GE(usable_cpus(), 1);
  EXPECT_FALSE(cuda_runtime_description().empty());
}

}  // namespace
}  // namespace mmfeed
