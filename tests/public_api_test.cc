// The public C++ API alone: this test is built against include/mmfeed/ and the `mmfeed` library
// without the engine's internal headers (it does not link mmfeed_internal), so what a user of
// the library needs to open a loader, set its options by name and read a batch is public.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "mmfeed/loader.h"
#include "mmfeed/loader_options.h"

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

}  // namespace
}  // namespace mmfeed
