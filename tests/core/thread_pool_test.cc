#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace mmfeed::core {
namespace {

using namespace std::chrono_literals;

TEST(ThreadPoolTest, RunsEverySubmittedTask) {
  ThreadPool pool("work", 3);
  std::atomic<int> sum{0};
  for (int i = 1; i <= 1000; ++i) ASSERT_TRUE(pool.submit([&sum, i] { sum += i; }));
  pool.wait_idle();
  EXPECT_EQ(sum.load(), 500500);
  EXPECT_EQ(pool.stats().tasks_run, 1000u);
}

TEST(ThreadPoolTest, WorkersCarryThePoolName) {
  ThreadPool pool("decode", 2);
  std::mutex mu;
  std::set<std::string> names;
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(pool.submit([&] {
      char name[32] = {};
      pthread_getname_np(pthread_self(), name, sizeof name);
      std::this_thread::sleep_for(1ms);
      std::lock_guard lock(mu);
      names.insert(name);
    }));
  }
  pool.wait_idle();
  EXPECT_EQ(pool.size(), 2u);
  for (const auto& n : names) EXPECT_TRUE(n == "decode-0" || n == "decode-1") << n;
}

TEST(ThreadPoolTest, AsyncCarriesResultsAndExceptions) {
  ThreadPool pool("async", 2);
  auto value = pool.async([] { return 6 * 7; });
  auto failure = pool.async([]() -> int { throw std::runtime_error("boom"); });
  EXPECT_EQ(value.get(), 42);
  EXPECT_THROW(failure.get(), std::runtime_error);
}

TEST(ThreadPoolTest, ShutdownRunsQueuedTasksThenRejects) {
  std::atomic<int> ran{0};
  ThreadPool pool("drain", 1, 64);
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(pool.submit([&] {
      std::this_thread::sleep_for(100us);
      ++ran;
    }));
  pool.shutdown();
  EXPECT_EQ(ran.load(), 50);
  EXPECT_FALSE(pool.submit([&] { ++ran; }));
  auto rejected = pool.async([] { return 1; });
  EXPECT_THROW(rejected.get(), std::runtime_error);
  pool.shutdown();  // idempotent
}

TEST(ThreadPoolTest, ATaskSubmittedFirstRunsBeforeTheQueuedOnes) {
  ThreadPool pool("first", 1, 4);
  std::mutex gate;
  std::unique_lock hold(gate);  // the one worker blocks on the first task until released
  std::vector<int> order;
  std::mutex order_mu;
  auto record = [&](int i) {
    std::lock_guard lock(order_mu);
    order.push_back(i);
  };
  ASSERT_TRUE(pool.submit([&] { std::lock_guard wait(gate); }));
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(pool.submit([&, i] { record(i); }));
  ASSERT_TRUE(pool.submit_first([&] { record(0); }));  // never blocks, even on a full queue
  hold.unlock();
  pool.wait_idle();
  // The gate task may or may not have started before submit_first; either way 0 precedes 1, 2, 3.
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  pool.shutdown();
  EXPECT_FALSE(pool.submit_first([] {}));
}

TEST(ThreadPoolTest, FullTaskQueueAppliesBackPressure) {
  ThreadPool pool("narrow", 1, 2);
  std::atomic<bool> release{false};
  ASSERT_TRUE(pool.submit([&] {
    while (!release) std::this_thread::sleep_for(1ms);
  }));
  std::this_thread::sleep_for(20ms);  // the worker is now inside the blocking task
  ASSERT_TRUE(pool.submit([] {}));
  ASSERT_TRUE(pool.submit([] {}));
  std::atomic<bool> third_accepted{false};
  std::thread submitter([&] {
    EXPECT_TRUE(pool.submit([] {}));
    third_accepted = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(third_accepted.load());
  release = true;
  submitter.join();
  pool.wait_idle();
  EXPECT_EQ(pool.stats().tasks_run, 4u);
}

TEST(ThreadPoolTest, WaitIdleFromManySubmitters) {
  ThreadPool pool("many", 2, 8);
  std::atomic<int> count{0};
  std::vector<std::thread> submitters;
  for (int s = 0; s < 4; ++s) {
    submitters.emplace_back([&] {
      for (int i = 0; i < 500; ++i) ASSERT_TRUE(pool.submit([&] { ++count; }));
    });
  }
  for (auto& t : submitters) t.join();
  pool.wait_idle();
  EXPECT_EQ(count.load(), 2000);
}

TEST(ThreadPoolTest, ZeroThreadsIsRejected) { EXPECT_THROW(ThreadPool("none", 0), std::invalid_argument); }

}  // namespace
}  // namespace mmfeed::core
