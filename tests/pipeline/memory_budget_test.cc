// The memory budget (pipeline/memory_budget.h): admission by window, by the first-admits rule and
// by the measured bytes per sample; batches wait for room unless the queue is empty; stop() wakes
// every waiter; a wider window lets the waiting reader in; the
// automatic prefetch depth grows only when the trainer waits on a loader the depth held back.
#include "pipeline/memory_budget.h"
#include "pipeline/prefetch_depth.h"

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
  budget.processed(a);          // 400 bytes a sample, 400 held
  ASSERT_TRUE(budget.admit());  // 400 + 1 x 400 < 1000
  std::atomic<bool> admitted{false};
  std::thread reader([&] { admitted = budget.admit(); });  // 400 + 2 x 400 >= 1000: waits
  budget.leave(a);                                         // the batcher took `a`: 0 held, 0 + 2 x 400 < 1000
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

TEST(MemoryBudgetTest, AWiderWindowLetsTheWaitingReaderIn) {
  MemoryBudget budget(/*max_bytes=*/1000, /*window=*/2, /*first_admits=*/100);
  ASSERT_TRUE(budget.admit());
  ASSERT_TRUE(budget.admit());
  std::atomic<bool> third{false};
  std::thread reader([&] { third = budget.admit(); });  // the window is full: waits
  budget.set_window(3);
  reader.join();
  EXPECT_TRUE(third.load());
  EXPECT_EQ(budget.window(), 3u);
}

TEST(MemoryBudgetTest, TheWindowFollowsThePrefetchDepth) {
  DriveOptions config;
  config.batch_size = 8;
  config.workers = 1;
  EXPECT_EQ(sample_window(config, 1), 26u);  // the prefetched batch's samples, two more batches', two per worker
  EXPECT_EQ(sample_window(config, 4), 50u);
  config.workers = 15;
  EXPECT_EQ(sample_window(config, 1), 54u);
  config.batch_size = 2;
  config.workers = 1;
  EXPECT_EQ(sample_window(config, 1), 16u);  // at least 16
  config.prefetch_batches = 0;
  EXPECT_EQ(memory_budget_for(config)->window(), 16u);
  config.batch_size = 8;
  config.prefetch_batches = 4;
  EXPECT_EQ(memory_budget_for(config)->window(), 50u);
}

TEST(PrefetchDepthTest, AutomaticGrowsOnlyWhenTheDepthHeldTheLoaderBack) {
  PrefetchDepth depth(0);
  EXPECT_TRUE(depth.automatic());
  EXPECT_EQ(depth.batches(), 1u);
  EXPECT_FALSE(depth.trainer_waited(/*held_back=*/false, /*starved=*/false));  // a loader slower than the trainer
  EXPECT_EQ(depth.batches(), 1u);
  EXPECT_TRUE(depth.trainer_waited(/*held_back=*/true, /*starved=*/false));
  EXPECT_EQ(depth.batches(), 2u);
  for (int i = 0; i < 100; ++i) depth.trainer_waited(true, false);
  EXPECT_EQ(depth.batches(), PrefetchDepth::kMostAutomatic);
}

TEST(PrefetchDepthTest, AutomaticShrinksWhenABatchWasAlwaysSpare) {
  PrefetchDepth depth(0);
  for (int i = 0; i < 3; ++i) depth.trainer_waited(true, false);
  ASSERT_EQ(depth.batches(), 4u);
  // Two or more ready at every take for kSettle takes: one batch of the depth was never needed.
  for (std::size_t i = 0; i + 1 < PrefetchDepth::kSettle; ++i) EXPECT_FALSE(depth.trainer_took(i % 2 == 0 ? 4 : 2));
  EXPECT_TRUE(depth.trainer_took(3));
  EXPECT_EQ(depth.batches(), 3u);
  // A take that found only its own batch keeps the depth for that stretch.
  for (std::size_t i = 0; i < PrefetchDepth::kSettle; ++i) EXPECT_FALSE(depth.trainer_took(i == 10 ? 1 : 3));
  EXPECT_EQ(depth.batches(), 3u);
  // A wait starts the stretch again.
  for (std::size_t i = 0; i + 1 < PrefetchDepth::kSettle; ++i) depth.trainer_took(3);
  depth.trainer_waited(false, false);
  EXPECT_FALSE(depth.trainer_took(3));
  EXPECT_EQ(depth.batches(), 3u);
  // Never below one batch.
  PrefetchDepth one(0);
  for (std::size_t i = 0; i < 4 * PrefetchDepth::kSettle; ++i) EXPECT_FALSE(one.trainer_took(2));
  EXPECT_EQ(one.batches(), 1u);
}

TEST(PrefetchDepthTest, AStarvedLoaderGetsMoreSamplesInFlight) {
  DriveOptions config;
  config.batch_size = 8;
  config.workers = 1;
  PrefetchDepth depth(0, /*step=*/8);
  EXPECT_EQ(sample_window(config, depth), 26u);
  EXPECT_FALSE(depth.trainer_waited(/*held_back=*/false, /*starved=*/false));  // bound by its CPUs
  EXPECT_TRUE(depth.trainer_waited(/*held_back=*/false, /*starved=*/true));    // waiting on storage
  EXPECT_EQ(depth.batches(), 1u);
  EXPECT_EQ(depth.extra_samples(), 8u);
  EXPECT_EQ(sample_window(config, depth), 34u);
  EXPECT_TRUE(depth.trainer_waited(/*held_back=*/true, /*starved=*/true));  // held back: the depth first
  EXPECT_EQ(depth.batches(), 2u);
  EXPECT_EQ(depth.extra_samples(), 8u);
  for (int i = 0; i < 100; ++i) depth.trainer_waited(false, true);
  EXPECT_EQ(depth.extra_samples(), depth.most_extra_samples());
  EXPECT_EQ(depth.most_extra_samples(), PrefetchDepth::kMostExtraSteps * 8);
  // Settled with a batch to spare: the allowance is given back before the depth.
  for (std::size_t i = 0; i < PrefetchDepth::kSettle; ++i) depth.trainer_took(2);
  EXPECT_EQ(depth.extra_samples(), depth.most_extra_samples() - 8);
  EXPECT_EQ(depth.batches(), 2u);
}

TEST(PrefetchDepthTest, AFixedDepthNeverChanges) {
  PrefetchDepth depth(4);
  EXPECT_FALSE(depth.automatic());
  EXPECT_FALSE(depth.trainer_waited(true, true));
  EXPECT_EQ(depth.most_extra_samples(), 0u);
  for (std::size_t i = 0; i < 2 * PrefetchDepth::kSettle; ++i) EXPECT_FALSE(depth.trainer_took(4));
  EXPECT_EQ(depth.batches(), 4u);
}

}  // namespace
}  // namespace mmfeed::pipeline
