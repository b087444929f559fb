// The memory budget (pipeline/memory_budget.h): admission by window, by the first-admits rule and
// by the measured bytes per sample; batches wait for room unless the queue is empty; stop() wakes
// every waiter.
#include "pipeline/memory_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace mmfeed::pipeline {
namespace {

TEST(MemoryBudgetTest, BeforeAnyMeasureOnlyTheFirstAdmitsGoIn) {
  MemoryBudget budget(/*max_bytes=*/1000, /*window=*/8, /*first_admits=*/2);
  ASSERT_TRUE(budget.admit());
  ASSERT_TRUE(budget.admit());
  std::atomic<bool> third{false};
  std::thread reader([&] { third = budget.admit(); });
  Work done;
  budget.processed(done);  // 1 unprocessed, measured: 0 bytes a sample, so the third fits
  reader.join();
  EXPECT_TRUE(third.load());
}

TEST(MemoryBudgetTest, TheMeasuredSizeBoundsWhatIsAdmitted) {
  MemoryBudget budget(/*max_bytes=*/1000, /*window=*/100, /*first_admits=*/1);
  ASSERT_TRUE(budget.admit());
  Work a;
  budget.hold(a, 400);
  budget.processed(a);  // 400 bytes a sample, 400 held
  ASSERT_TRUE(budget.admit());  // 400 + 1 x 400 < 1000
  std::atomic<bool> admitted{false};
  std::thread reader([&] { admitted = budget.admit(); });  // 400 + 2 x 400 >= 1000: waits
  budget.leave(a);  // the batcher took `a`: 0 held, 0 + 2 x 400 < 1000
  reader.join();
  EXPECT_TRUE(admitted.load());
  EXPECT_EQ(budget.held_bytes(), 0);
}

TEST(MemoryBudgetTest, TheWindowBoundsSamplesInFlight) {
  MemoryBudget budget(/*max_bytes=*/1 << 30, /*window=*/2, /*first_admits=*/100);
  ASSERT_TRUE(budget.admit());
  ASSERT_TRUE(budget.admit());
  std::atomic<bool> third{true};
  std::thread reader([&] { third = budget.admit(); });
  budget.stop();  // the window is full: only stop() lets the reader go, refused
  reader.join();
  EXPECT_FALSE(third.load());
}

TEST(MemoryBudgetTest, ABatchWaitsForRoomUnlessTheQueueIsEmpty) {
  MemoryBudget budget(/*max_bytes=*/100, /*window=*/8, /*first_admits=*/8);
  EXPECT_TRUE(budget.wait_for_batch(500, [] { return true; }));  // one batch always fits
  std::atomic<bool> queued{false};
  std::thread batcher([&] { queued = budget.wait_for_batch(50, [] { return false; }); });
  budget.batch_taken(500);
  batcher.join();
  EXPECT_TRUE(queued.load());
  EXPECT_EQ(budget.held_bytes(), 50);
}

TEST(MemoryBudgetTest, StopWakesAWaitingBatcher) {
  MemoryBudget budget(/*max_bytes=*/100, /*window=*/8, /*first_admits=*/8);
  ASSERT_TRUE(budget.wait_for_batch(100, [] { return true; }));
  std::atomic<bool> queued{true};
  std::thread batcher([&] { queued = budget.wait_for_batch(50, [] { return false; }); });
  budget.stop();
  batcher.join();
  EXPECT_FALSE(queued.load());
}

}  // namespace
}  // namespace mmfeed::pipeline
