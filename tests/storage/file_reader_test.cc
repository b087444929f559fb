#include "storage/file_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

namespace mmfeed::storage {
namespace {

using namespace std::chrono_literals;
using Results = std::vector<std::pair<std::uint64_t, Result<core::Buffer>>>;

// A read that cannot be interrupted, as one on a stalled network mount: reads of the path
// "stuck" block on a pipe until the test writes to it; other paths are read for real.
class StuckRead {
 public:
  StuckRead() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    state_->in = fds[0];
    out_ = fds[1];
  }
  ~StuckRead() {
    release();
    ::close(state_->in);
  }

  // The read function; it owns what it touches, since the reader may run it after the test.
  FileReader::ReadFunction function() {
    return [state = state_](const FileRead& read, core::BufferPool& pool) -> Result<core::Buffer> {
      if (read.path != "stuck") return read_file(read, pool);
      state->started.store(true);
      char c = 0;
      (void)::read(state->in, &c, 1);
      state->returned.set_value();
      return Error(ErrorCode::kIoError, "the stuck read returned", read.uri);
    };
  }

  bool started() const { return state_->started.load(); }

  // Lets the blocked read return; waits until it has.
  void release() {
    if (out_ < 0) return;
    ::close(out_);
    out_ = -1;
    state_->returned_future.wait();
  }

 private:
  struct State {
    int in = -1;
    std::atomic<bool> started{false};
    std::promise<void> returned;
    std::shared_future<void> returned_future = returned.get_future().share();
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  int out_ = -1;
};

// Polls take_done() until it yields something; the generous bound only catches a hang.
Results wait_for_results(FileReader& reader) {
  for (int i = 0; i < 6000; ++i) {
    Results r = reader.take_done();
    if (!r.empty()) return r;
    std::this_thread::sleep_for(10ms);
  }
  return {};
}

TEST(FileReaderTest, FinishedReadsAreReturnedOnceAndWakeTheOwner) {
  const auto path = std::filesystem::temp_directory_path() / ("mmfeed-file-reader-" + std::to_string(getpid()));
  std::ofstream(path, std::ios::binary) << std::string(5000, 'x');
  auto wakes = std::make_shared<std::atomic<int>>(0);
  FileReader reader(2, core::BufferPool(), [wakes] { ++*wakes; });
  for (std::uint64_t id = 0; id < 10; ++id) reader.submit({.id = id, .path = path, .uri = path, .offset = id}, 60'000);
  std::map<std::uint64_t, std::size_t> sizes;
  for (int i = 0; i < 6000 && sizes.size() < 10; ++i) {
    for (auto& [id, data] : reader.take_done()) {
      EXPECT_TRUE(sizes.emplace(id, data.value().size()).second) << "returned twice: " << id;
    }
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(sizes.size(), 10u);
  for (const auto& [id, size] : sizes) EXPECT_EQ(size, 5000 - id);
  EXPECT_EQ(*wakes, 10);
  std::filesystem::remove(path);
}

// Issue 15: a local read had no deadline. One still running at its deadline is returned as
// kTimeout, and so is one queued behind it that no reader took in time.
TEST(FileReaderTest, Issue15AStuckReadIsAbandonedAtItsDeadline) {
  StuckRead stuck;
  FileReader reader(
      1, core::BufferPool(), [] {}, stuck.function());
  reader.submit({.id = 1, .path = "stuck", .uri = "file:///mnt/stalled/a.jpg"}, 200);
  reader.submit({.id = 2, .path = "queued", .uri = "file:///mnt/stalled/b.jpg"}, 200);
  Results results;
  while (results.size() < 2) {
    Results more = wait_for_results(reader);
    ASSERT_FALSE(more.empty()) << "no result";
    for (auto& r : more) results.push_back(std::move(r));
  }
  std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  ASSERT_FALSE(results[0].second.ok());
  EXPECT_EQ(results[0].second.error().code(), ErrorCode::kTimeout);
  EXPECT_EQ(results[0].second.error().to_string(),
            "file:///mnt/stalled/a.jpg: local read still running at the attempt deadline of 200 ms; abandoned "
            "(a stalled file system?)");
  ASSERT_FALSE(results[1].second.ok());
  EXPECT_EQ(results[1].second.error().code(), ErrorCode::kTimeout);
  EXPECT_NE(results[1].second.error().message().find("not started within the attempt deadline of 200 ms"),
            std::string::npos);
  stuck.release();
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(reader.take_done().empty()) << "the abandoned read came back";
}

// Issue 15: destroying the reader (the Fetcher's destructor, cancel()) must not wait for a read
// that may never end; the reader thread, detached, finishes later without touching freed state.
TEST(FileReaderTest, Issue15DestructionDoesNotWaitForAStuckRead) {
  StuckRead stuck;
  auto wakes = std::make_shared<std::atomic<int>>(0);
  auto reader = std::make_unique<FileReader>(
      2, core::BufferPool(), [wakes] { ++*wakes; }, stuck.function());
  reader->submit({.id = 1, .path = "stuck", .uri = "stuck"}, 600'000);
  for (int i = 0; i < 6000 && !stuck.started(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(stuck.started());

  auto destroyed = std::make_shared<std::promise<void>>();
  auto done = destroyed->get_future();
  std::thread([&reader, destroyed] {
    reader.reset();
    destroyed->set_value();
  }).detach();
  const bool returned = done.wait_for(60s) == std::future_status::ready;  // generous: only a hang misses it
  stuck.release();  // the read returns now, after its FileReader is gone
  if (!returned) done.wait();
  EXPECT_TRUE(returned) << "~FileReader waited for the stuck read";
  EXPECT_EQ(*wakes, 0) << "a read that returned after destruction woke its former owner";
}

TEST(FileReaderTest, Issue15AbandonedReadsAreNeverReturned) {
  StuckRead stuck;
  FileReader reader(
      1, core::BufferPool(), [] {}, stuck.function());
  reader.submit({.id = 1, .path = "stuck", .uri = "stuck"}, 600'000);
  for (int i = 0; i < 6000 && !stuck.started(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(stuck.started());
  reader.abandon(1);
  stuck.release();
  reader.submit({.id = 2, .path = "missing", .uri = "missing"}, 600'000);
  const Results results = wait_for_results(reader);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].first, 2u);
}

}  // namespace
}  // namespace mmfeed::storage
