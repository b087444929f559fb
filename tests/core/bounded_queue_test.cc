#include "core/bounded_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

namespace mmfeed::core {
namespace {

using namespace std::chrono_literals;

TEST(BoundedQueueTest, DeliversInFifoOrder) {
  BoundedQueue<int> q(4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.push(int(i)));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(q.pop(), i);
  EXPECT_EQ(q.try_pop(), std::nullopt);
}

TEST(BoundedQueueTest, NeverHoldsMoreThanItsCapacity) {
  BoundedQueue<int> q(3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.try_push(int(i)));
  EXPECT_FALSE(q.try_push(99));
  EXPECT_FALSE(q.push_for(99, 20ms));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.stats().max_depth, 3u);
}

TEST(BoundedQueueTest, FullQueueBlocksProducerUntilAPop) {
  BoundedQueue<int> q(1);
  ASSERT_TRUE(q.push(1));
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    EXPECT_TRUE(q.push(2));
    pushed = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(pushed.load());
  EXPECT_EQ(q.pop(), 1);
  producer.join();
  EXPECT_TRUE(pushed.load());
  EXPECT_EQ(q.pop(), 2);
  EXPECT_GT(q.stats().producer_wait_ns, 0);
}

TEST(BoundedQueueTest, GrowingTheCapacityWakesABlockedProducer) {
  BoundedQueue<int> q(1);
  ASSERT_TRUE(q.push(1));
  std::thread producer([&] { EXPECT_TRUE(q.push(2)); });
  while (q.stats().producer_waits == 0) std::this_thread::sleep_for(1ms);  // blocked on the full queue
  q.set_capacity(2);
  producer.join();
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.capacity(), 2u);
  EXPECT_EQ(q.stats().producer_waits, 1u);
}

TEST(BoundedQueueTest, ShrinkingTheCapacityKeepsWhatIsQueued) {
  BoundedQueue<int> q(3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.try_push(int(i)));
  q.set_capacity(1);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_FALSE(q.try_push(3));
  EXPECT_EQ(q.pop(), 0);
  EXPECT_EQ(q.pop(), 1);
  EXPECT_FALSE(q.try_push(3));  // still one queued: at the capacity
  EXPECT_EQ(q.pop(), 2);
  EXPECT_TRUE(q.try_push(3));
  EXPECT_THROW(q.set_capacity(0), std::invalid_argument);
}

TEST(BoundedQueueTest, WaitForRoomReturnsOnceAPopMakesRoomAndFalseOnceClosed) {
  BoundedQueue<int> q(1);
  EXPECT_TRUE(q.wait_for_room());  // room already: no wait
  ASSERT_TRUE(q.push(1));
  std::thread producer([&] { EXPECT_TRUE(q.wait_for_room()); });
  while (q.stats().producer_waits == 0) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(q.pop(), 1);
  producer.join();
  EXPECT_TRUE(q.try_push(2));  // the one producer finds the room it waited for
  std::thread closed([&] { EXPECT_FALSE(q.wait_for_room()); });
  while (q.stats().producer_waits == 1) std::this_thread::sleep_for(1ms);
  q.close();
  closed.join();
}

TEST(BoundedQueueTest, RejectedPushLeavesTheItemWithTheCaller) {
  BoundedQueue<std::unique_ptr<int>> q(1);
  q.close();
  auto item = std::make_unique<int>(42);
  EXPECT_FALSE(q.push(std::move(item)));
  ASSERT_NE(item, nullptr);
  EXPECT_EQ(*item, 42);
}

TEST(BoundedQueueTest, CloseLetsConsumersDrainThenEnds) {
  BoundedQueue<int> q(8);
  ASSERT_TRUE(q.push(1));
  ASSERT_TRUE(q.push(2));
  q.close();
  EXPECT_FALSE(q.push(3));
  EXPECT_EQ(q.pop(), 1);
  EXPECT_EQ(q.pop(), 2);
  EXPECT_EQ(q.pop(), std::nullopt);
  EXPECT_TRUE(q.closed());
}

TEST(BoundedQueueTest, CloseWakesEveryBlockedConsumer) {
  BoundedQueue<int> q(2);
  std::atomic<int> woke{0};
  std::vector<std::thread> consumers;
  for (int i = 0; i < 4; ++i) {
    consumers.emplace_back([&] {
      EXPECT_EQ(q.pop(), std::nullopt);
      ++woke;
    });
  }
  std::this_thread::sleep_for(30ms);
  q.close();
  for (auto& t : consumers) t.join();
  EXPECT_EQ(woke.load(), 4);
}

TEST(BoundedQueueTest, CloseWakesEveryBlockedProducer) {
  BoundedQueue<int> q(1);
  ASSERT_TRUE(q.push(0));
  std::atomic<int> rejected{0};
  std::vector<std::thread> producers;
  for (int i = 0; i < 4; ++i) {
    producers.emplace_back([&, i] {
      if (!q.push(int(i))) ++rejected;
    });
  }
  std::this_thread::sleep_for(30ms);
  q.close();
  for (auto& t : producers) t.join();
  EXPECT_EQ(rejected.load(), 4);
  EXPECT_EQ(q.pop(), 0);
}

TEST(BoundedQueueTest, CancelReturnsWhatWasQueuedAndStopsPops) {
  BoundedQueue<int> q(4);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.push(int(i)));
  std::vector<int> left = q.cancel();
  EXPECT_EQ(left, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(q.pop(), std::nullopt);
  EXPECT_FALSE(q.push(7));
  EXPECT_TRUE(q.cancelled());
}

TEST(BoundedQueueTest, PopForTimesOutOnAnEmptyOpenQueue) {
  BoundedQueue<int> q(1);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(q.pop_for(30ms), std::nullopt);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
  EXPECT_FALSE(q.closed());
}

TEST(BoundedQueueTest, ZeroCapacityIsRejected) { EXPECT_THROW(BoundedQueue<int>(0), std::invalid_argument); }

// Many producers and consumers through a small queue: every item arrives exactly once.
TEST(BoundedQueueTest, ContentionLosesAndDuplicatesNothing) {
  constexpr int kProducers = 4, kConsumers = 4, kPerProducer = 20000;
  BoundedQueue<int> q(8);
  std::vector<std::vector<int>> received(kConsumers);
  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&, c] {
      while (auto v = q.pop()) received[c].push_back(*v);
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) ASSERT_TRUE(q.push(p * kPerProducer + i));
    });
  }
  for (auto& t : producers) t.join();
  q.close();
  for (auto& t : threads) t.join();

  std::vector<int> all;
  for (auto& r : received) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  std::vector<int> expected(kProducers * kPerProducer);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected);
  EXPECT_LE(q.stats().max_depth, 8u);
}

// Per-producer order survives contention (each consumer sees each producer's items ascending).
TEST(BoundedQueueTest, ContentionKeepsEachProducersOrder) {
  constexpr int kProducers = 3, kPerProducer = 10000;
  BoundedQueue<std::pair<int, int>> q(4);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) ASSERT_TRUE(q.push({p, i}));
    });
  }
  std::vector<int> last(kProducers, -1);
  for (int n = 0; n < kProducers * kPerProducer; ++n) {
    auto v = q.pop();
    ASSERT_TRUE(v.has_value());
    EXPECT_GT(v->second, last[v->first]);
    last[v->first] = v->second;
  }
  for (auto& t : producers) t.join();
}

// close() racing with producers: every push that reported success is popped, every rejected
// one stayed with its producer. Nothing vanishes in between.
TEST(BoundedQueueTest, CloseRacingProducersAccountsForEveryItem) {
  for (int round = 0; round < 50; ++round) {
    BoundedQueue<int> q(4);
    std::atomic<long> accepted{0}, rejected{0};
    std::atomic<long> consumed{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < 3; ++p) {
      threads.emplace_back([&] {
        for (int i = 0; i < 500; ++i) {
          if (q.push(int(i))) {
            ++accepted;
          } else {
            ++rejected;
          }
        }
      });
    }
    std::thread consumer([&] {
      while (q.pop()) ++consumed;
    });
    std::this_thread::sleep_for(std::chrono::microseconds(50 * (round % 5)));
    q.close();
    for (auto& t : threads) t.join();
    consumer.join();
    EXPECT_EQ(accepted + rejected, 1500);
    EXPECT_EQ(consumed.load(), accepted.load());
  }
}

// cancel() racing with producers and consumers: accepted = consumed + returned by cancel.
TEST(BoundedQueueTest, CancelRacingBothSidesAccountsForEveryItem) {
  for (int round = 0; round < 50; ++round) {
    BoundedQueue<int> q(4);
    std::atomic<long> accepted{0}, consumed{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < 2; ++p) {
      threads.emplace_back([&] {
        for (int i = 0; i < 1000; ++i) {
          if (q.push(int(i))) ++accepted;
        }
      });
    }
    for (int c = 0; c < 2; ++c) {
      threads.emplace_back([&] {
        while (q.pop()) ++consumed;
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(40 * (round % 5)));
    std::vector<int> left = q.cancel();
    for (auto& t : threads) t.join();
    EXPECT_EQ(accepted.load(), consumed.load() + static_cast<long>(left.size()));
  }
}

}  // namespace
}  // namespace mmfeed::core
