// The CUDA path without a GPU: the pinned batch memory, the copy stage and their exit paths run
// against the test CUDA runtime (test_cudart.cc, named by MMFEED_CUDART in this program's test
// environment), which backs devices with host memory and aborts on misuse.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "device/cuda_runtime.h"
#include "mmfeed/loader.h"
#include "pipeline/device_copy.h"

namespace mmfeed::pipeline {
namespace {

using std::chrono::milliseconds;

// A call count of the test runtime (mmfeedTestCudartCount).
long runtime_count(const char* name) {
  static auto count = [] {
    const char* path = std::getenv("MMFEED_CUDART");
    void* handle = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    return handle != nullptr ? reinterpret_cast<long (*)(const char*)>(dlsym(handle, "mmfeedTestCudartCount"))
                             : nullptr;
  }();
  return count != nullptr ? count(name) : -1;
}

class DeviceCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("MMFEED_CUDART"), nullptr) << "run through ctest: it names the test runtime";
    const device::CudaRuntime& cuda = device::CudaRuntime::get();
    ASSERT_TRUE(cuda.available() && cuda.copies_available()) << cuda.describe();
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-device-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const std::string corpus = MMFEED_TEST_DATA_DIR "/corpus/decode/";
    std::ofstream m(dir_ / "manifest.jsonl");
    const char* images[] = {"baseline.jpg", "rgb.png", "lossless.webp", "progressive.jpg"};
    for (int i = 0; i < 24; ++i) {
      // None to three images and text of varying length: batches of varying sizes.
      m << R"({"id": "s)" << i << R"(", "messages": [{"role": "user", "content": [)";
      const int count = i % 7 == 0 ? 3 : i % 5 == 2 ? 0 : 1;
      for (int k = 0; k < count; ++k) {
        m << R"({"type": "image", "image": ")" << corpus << images[(i + k) % 4] << "\"}, ";
      }
      m << R"({"type": "text", "text": "what )" << std::string(static_cast<std::size_t>(i % 7) * 9, 'x')
        << R"("}]}, {"role": "assistant", "content": "answer )" << i << R"("}]})"
        << "\n";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LoaderConfig config() const {
    LoaderConfig c;
    c.manifests = {(dir_ / "manifest.jsonl").string()};
    c.tokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
    c.batch_size = 4;
    c.workers = 2;
    c.epochs = 2;
    return c;
  }

  // The next device batch, waiting as long as it takes.
  static Result<std::optional<Batch>> next(DeviceCopy& copy, void* stream = nullptr) {
    bool timed_out = true;
    Result<std::optional<Batch>> b = Error(ErrorCode::kInternal, "unset");
    while (timed_out) b = copy.next_for(milliseconds(100), &timed_out, stream);
    return b;
  }

  std::filesystem::path dir_;
};

TEST_F(DeviceCopyTest, TheTestRuntimeIsFoundAndPinsTheBatchMemory) {
  EXPECT_NE(device::CudaRuntime::get().describe().find("test_cudart"), std::string::npos);
  auto loader = Loader::open(config()).value();
  const auto b = loader->next().value();
  ASSERT_TRUE(b);
  EXPECT_TRUE(device::CudaRuntime::get().is_pinned(b->buffer()));
  EXPECT_NE(loader->metrics_json().find("pinned batch memory on device 0"), std::string::npos)
      << loader->metrics_json();
}

TEST_F(DeviceCopyTest, DeviceBatchesEqualHostBatchesAndTheStateCountsOnlyWhatWasHandedOver) {
  auto host = Loader::open(config()).value();
  auto source = Loader::open(config()).value();
  auto copy = DeviceCopy::start(*source, 0, 2, 64 << 20).value();
  EXPECT_EQ(copy->state().to_json(), host->state().to_json());
  int batches = 0;
  while (true) {
    auto expected = host->next().value();
    auto got = next(*copy).value();
    ASSERT_EQ(expected.has_value(), got.has_value());
    if (!got) break;
    ++batches;
    EXPECT_EQ(got->device, 0);
    EXPECT_EQ(expected->device, -1);
    EXPECT_EQ(got->sample_ids, expected->sample_ids);
    EXPECT_NE(got->buffer(), expected->buffer());
    ASSERT_EQ(got->tensors.size(), expected->tensors.size());
    for (std::size_t i = 0; i < got->tensors.size(); ++i) {
      const Tensor& t = expected->tensors[i];
      ASSERT_EQ(got->tensors[i].name, t.name);
      ASSERT_EQ(got->tensors[i].shape, t.shape);
      // The test runtime's device memory is host memory: read it back directly.
      EXPECT_EQ(std::memcmp(got->data(got->tensors[i]), expected->data(t), t.bytes()), 0)
          << t.name << " of batch " << batches;
    }
    // Batches staged ahead are not delivered: the state is the host loader's after the same batch.
    EXPECT_EQ(copy->state().to_json(), host->state().to_json());
  }
  EXPECT_EQ(batches, 12);
  EXPECT_FALSE(next(*copy).value().has_value());  // the end, again
  EXPECT_NE(copy->to_json().find("\"copies\":12"), std::string::npos) << copy->to_json();
  EXPECT_NE(copy->to_json().find("\"pageable_copies\":0"), std::string::npos) << copy->to_json();
}

// The copies the stage has made (its metrics).
std::uint64_t copies_made(const DeviceCopy& copy) {
  const std::string json = copy.to_json();
  const std::size_t at = json.find("\"copies\":") + 9;
  return std::stoull(json.substr(at));
}

TEST_F(DeviceCopyTest, OnceWarmNoCallAllocatesOrSynchronisesTheDevice) {
  LoaderConfig c = config();
  c.shuffle = false;  // every epoch the same batches: the largest is met in the first
  c.epochs = 4;
  c.prefetch_batches = 2;  // the loader's depth fixed: at most 2 queued + 1 building + 1 being copied
  constexpr std::size_t kDepth = 2, kHeld = 2;
  constexpr long kMostHostBuffers = 2 + 1 + 1;
  auto source = Loader::open(c).value();
  auto copy = DeviceCopy::start(*source, 0, kDepth, 64 << 20).value();
  const char* heavy[] = {"cudaMalloc", "cudaFree", "cudaFreeHost", "cudaMemcpy"};
  std::map<std::string, long> warm;
  std::vector<std::size_t> sizes;
  std::vector<Batch> held;  // the trainer keeps its last batches alive, as a step's graph does
  std::uint64_t taken = 0;
  while (true) {
    // Before each take, the stage is as far ahead as it goes (the queue full, one more copied
    // and waiting to be queued), whatever the relative speeds; a stage that does not get there
    // in two minutes fails here, by name, not later by an allocation.
    const std::uint64_t ahead = std::min<std::uint64_t>(taken + kDepth + 1, 24);
    for (int i = 0; i < 120'000 && copies_made(*copy) < ahead; ++i) std::this_thread::sleep_for(milliseconds(1));
    ASSERT_GE(copies_made(*copy), ahead) << "the stage did not get ahead of batch " << taken;
    // Now (until the data ends) all the device blocks ever in use at once are: the trainer's
    // two, the queue's two and the one waiting to be queued. Taking a batch never adds to that:
    // the trainer lets its oldest go first.
    if (held.size() == kHeld) held.erase(held.begin());
    auto b = next(*copy).value();
    if (!b) break;
    ++taken;
    if (b->epoch == 2 && warm.empty()) {  // two epochs: the largest batch seen, every block of its size
      for (const char* call : heavy) warm[call] = runtime_count(call);
      warm["live_pinned"] = runtime_count("live_pinned");
    }
    std::size_t bytes = 0;
    for (const Tensor& t : b->tensors) bytes += t.bytes();
    sizes.push_back(bytes);
    held.push_back(std::move(*b));
  }
  EXPECT_EQ(taken, 24u);
  ASSERT_FALSE(warm.empty());
  EXPECT_GT(warm["cudaMalloc"], 0);
  EXPECT_GT(warm["live_pinned"], 0);
  // The device blocks are all in use at the takes above, so none is missing once warm; the host
  // side (the loader's own pace) may still page-lock a block it has not needed at once yet, up
  // to what it can ever hold at once, but never frees one.
  for (const char* call : heavy) EXPECT_EQ(runtime_count(call), warm[call]) << call << " once warm";
  EXPECT_LE(runtime_count("live_pinned"), kMostHostBuffers);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  EXPECT_GE(sizes.size(), 3u) << "batch sizes vary";
  EXPECT_GE(2 * sizes.back(), 3 * sizes.front()) << "batch sizes vary by more than a size class";
}

TEST_F(DeviceCopyTest, ClosingMidRunAndDroppingEverythingGivesEveryBlockBack) {
  const long pinned_before = runtime_count("live_pinned");
  const long device_before = runtime_count("live_device");
  {
    auto source = Loader::open(config()).value();
    auto copy = DeviceCopy::start(*source, 0, 3, 64 << 20).value();
    auto kept = next(*copy).value();
    ASSERT_TRUE(kept);
    ASSERT_TRUE(source->close().ok());  // copies staged and in flight
    copy->close();
    EXPECT_EQ(next(*copy).error().code(), ErrorCode::kCancelled);
    copy.reset();
    source.reset();
    EXPECT_GT(runtime_count("live_device"), device_before) << "the kept batch holds its block";
  }
  EXPECT_EQ(runtime_count("live_device"), device_before);
  EXPECT_EQ(runtime_count("live_pinned"), pinned_before);
}

TEST_F(DeviceCopyTest, TheLoadersErrorReachesTheTrainerEveryTime) {
  {
    std::ofstream m(dir_ / "manifest.jsonl", std::ios::app);
    m << R"({"id": "bad", "messages": [{"role": "user", "content": [{"type": "image", "image": ")"
      << MMFEED_TEST_DATA_DIR << R"(/corpus/decode/truncated-baseline.jpg"}]}]})"
      << "\n";
  }
  LoaderConfig c = config();
  c.on_error = OnError::kFail;
  c.epochs = 1;
  auto source = Loader::open(c).value();
  auto copy = DeviceCopy::start(*source, 0, 2, 64 << 20).value();
  Result<std::optional<Batch>> b = std::optional<Batch>();
  do b = next(*copy);
  while (b.ok() && b->has_value());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().to_string().find("bad"), std::string::npos) << b.error().to_string();
  EXPECT_EQ(next(*copy).error().to_string(), b.error().to_string());
}

TEST_F(DeviceCopyTest, CopiesAndTheTrainersWaitsAreInTheLoadersTrace) {
  LoaderConfig c = config();
  c.epochs = 1;
  c.trace_path = (dir_ / "trace.json").string();
  auto source = Loader::open(c).value();
  auto copy = DeviceCopy::start(*source, 0, 2, 64 << 20).value();
  int batches = 0;
  while (next(*copy).value()) ++batches;
  EXPECT_NE(copy->to_json().find("\"trainer_wait_s\":"), std::string::npos) << copy->to_json();
  copy->close();
  ASSERT_TRUE(source->close().ok());  // writes the trace
  std::ifstream in(c.trace_path);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t copies = 0;
  for (std::size_t at = trace.find("\"copy to device\""); at != std::string::npos;
       at = trace.find("\"copy to device\"", at + 1)) {
    ++copies;
  }
  EXPECT_EQ(copies, static_cast<std::size_t>(batches));
  EXPECT_NE(trace.find("\"next (device batch)\""), std::string::npos);
  EXPECT_NE(trace.find("\"h2d\""), std::string::npos) << "the copy thread's track is named";
}

TEST_F(DeviceCopyTest, ADeviceTheRuntimeDoesNotHaveIsRefused) {
  auto source = Loader::open(config()).value();
  auto copy = DeviceCopy::start(*source, 7, 2, 64 << 20);
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(copy.error().to_string().find("cuda:7 does not exist (1 visible)"), std::string::npos)
      << copy.error().to_string();
}

// Issue 19: batches that outlive main() (held by globals or a library's static state) were given
// back to a runtime already torn down; the test runtime aborts there.
TEST_F(DeviceCopyTest, BatchesFreedAfterTheRuntimesTeardownDoNotCallIt) {
  const std::string command = std::string(MMFEED_DEVICE_EXIT_PROGRAM) + " " + (dir_ / "manifest.jsonl").string() + " " +
                              MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace mmfeed::pipeline
