#include "core/buffer_pool.h"
#include "core/scratch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace mmfeed::core {
namespace {

TEST(BufferPoolTest, SizeClassesBoundTheSlack) {
  EXPECT_EQ(BufferPool::size_class(0), 4096u);
  EXPECT_EQ(BufferPool::size_class(4096), 4096u);
  EXPECT_EQ(BufferPool::size_class(4097), 5120u);
  EXPECT_EQ(BufferPool::size_class(8192), 8192u);
  EXPECT_EQ(BufferPool::size_class(8193), 10240u);
  for (std::size_t bytes = 1; bytes < (std::size_t{1} << 34); bytes = bytes * 3 + 7) {
    const std::size_t c = BufferPool::size_class(bytes);
    EXPECT_GE(c, bytes);
    if (bytes > 4096) {
      EXPECT_LE(c, bytes + bytes / 4) << bytes;
    }
    EXPECT_EQ(BufferPool::size_class(c), c) << "a class maps to itself";
  }
}

TEST(BufferPoolTest, BuffersAreAlignedAndWritable) {
  BufferPool pool({.alignment = 256});
  for (std::size_t bytes : {1u, 100u, 4096u, 5000u, 1000000u}) {
    Buffer b = pool.acquire(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 256, 0u);
    EXPECT_EQ(b.size(), bytes);
    EXPECT_GE(b.capacity(), bytes);
    std::memset(b.data(), 0xAB, bytes);
  }
}

TEST(BufferPoolTest, ReleasedMemoryIsReused) {
  BufferPool pool;
  std::byte* first = nullptr;
  {
    Buffer b = pool.acquire(100000);
    first = b.data();
  }
  Buffer again = pool.acquire(99000);  // same size class
  EXPECT_EQ(again.data(), first);
  const BufferPoolStats s = pool.stats();
  EXPECT_EQ(s.acquires, 2u);
  EXPECT_EQ(s.reuses, 1u);
  EXPECT_EQ(s.allocations, 1u);
  EXPECT_EQ(s.bytes_in_use, again.capacity());
}

TEST(BufferPoolTest, ARequestReusesTheSmallestCachedBlockThatFits) {
  BufferPool pool;
  std::byte *big = nullptr, *mid = nullptr;
  {
    Buffer a = pool.acquire(400000);
    Buffer b = pool.acquire(140000);  // class 147456
    big = a.data();
    mid = b.data();
  }
  Buffer larger = pool.acquire(200000);  // the only cached block that fits: the 400000 one
  EXPECT_EQ(larger.data(), big);
  EXPECT_EQ(larger.capacity(), BufferPool::size_class(400000));
  Buffer smaller = pool.acquire(50000);  // the smallest that fits: the 147456 block
  EXPECT_EQ(smaller.data(), mid);
  EXPECT_EQ(smaller.size(), 50000u);
  EXPECT_EQ(smaller.capacity(), BufferPool::size_class(140000));
  Buffer fresh = pool.acquire(100000);  // nothing cached: a new block
  EXPECT_NE(fresh.data(), big);
  EXPECT_NE(fresh.data(), mid);
  smaller.reset();
  EXPECT_EQ(pool.stats().bytes_cached, BufferPool::size_class(140000));  // back under its own class
  Buffer exact = pool.acquire(140000);
  EXPECT_EQ(exact.data(), mid);
  EXPECT_EQ(pool.stats().reuses, 3u);
  EXPECT_EQ(pool.stats().allocations, 3u);
}

TEST(BufferPoolTest, LargeBlocksAreHugePageAlignedAndReused) {
  BufferPool pool;
  std::byte* first = nullptr;
  {
    Buffer b = pool.acquire(9 << 20);
    first = b.data();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % (2 << 20), 0u);
    std::memset(b.data(), 1, b.size());
  }
  Buffer again = pool.acquire(9 << 20);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(static_cast<int>(again.data()[again.size() - 1]), 1);  // the same warm pages
}

TEST(ScratchVectorTest, LargeVectorsReuseWarmBlocksAndSkipTheZeroFill) {
  std::uint8_t* first = nullptr;
  {
    ScratchVector<std::uint8_t> v(1 << 20);
    first = v.data();
    std::memset(v.data(), 7, v.size());
  }
  ScratchVector<std::uint8_t> again(1 << 20);
  ASSERT_EQ(again.data(), first);        // from the process-wide scratch pool
  EXPECT_EQ(again[12345], 7);            // default-initialised: not zero-filled
  ScratchVector<float> small(10, 1.5f);  // below the pooling threshold: plain heap, values kept
  EXPECT_EQ(small[9], 1.5f);
  small.resize(20);
  small.push_back(2.0f);
  EXPECT_EQ(small.size(), 21u);
  EXPECT_EQ(small[20], 2.0f);
}

TEST(BufferPoolTest, AFullCacheEvictsSmallerBlocksForALargerOne) {
  BufferPool pool({.max_cached_bytes = 3 * 8192});
  { Buffer a = pool.acquire(8192), b = pool.acquire(8192), c = pool.acquire(8192); }
  EXPECT_EQ(pool.stats().bytes_cached, 3u * 8192);
  std::byte* big = nullptr;
  {
    Buffer d = pool.acquire(16384), e = pool.acquire(16384);  // the cached blocks are too small
    big = d.data();
    e.reset();  // evicts two 8192 blocks to stay within the budget
    EXPECT_EQ(pool.stats().bytes_cached, 8192u + 16384);
  }  // d cannot fit without evicting a block as large as itself: freed
  EXPECT_EQ(pool.stats().bytes_cached, 8192u + 16384);
  EXPECT_EQ(pool.stats().frees, 3u);
  Buffer again = pool.acquire(16384);
  EXPECT_NE(again.data(), big);  // the one cached is e's
  EXPECT_EQ(pool.stats().bytes_cached, 8192u);
}

TEST(BufferPoolTest, RawBlocksComeBestFitWithinFourTimesTheRequest) {
  BufferPool pool;
  std::size_t big_capacity = 1 << 20;
  std::byte* big = pool.take(&big_capacity);
  EXPECT_EQ(big_capacity, std::size_t{1} << 20);
  pool.give_back(big, big_capacity);
  std::size_t tiny = 100000;  // 1 MiB is more than 4x its class: a new block
  std::byte* fresh = pool.take(&tiny);
  EXPECT_NE(fresh, big);
  EXPECT_EQ(tiny, BufferPool::size_class(100000));
  std::size_t mid = 300000;  // within 4x: the cached 1 MiB block, its capacity reported
  EXPECT_EQ(pool.take(&mid), big);
  EXPECT_EQ(mid, std::size_t{1} << 20);
  pool.give_back(big, mid);
  pool.give_back(fresh, tiny);
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
}

TEST(BufferPoolTest, CacheRespectsItsByteBudget) {
  BufferPool pool({.max_cached_bytes = 3 * 4096});
  {
    std::vector<Buffer> held;
    for (int i = 0; i < 5; ++i) held.push_back(pool.acquire(4096));
    EXPECT_EQ(pool.stats().bytes_in_use, 5u * 4096);
  }
  const BufferPoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.bytes_cached, 3u * 4096);
  EXPECT_EQ(s.frees, 2u);
  EXPECT_EQ(s.peak_bytes_in_use, 5u * 4096);
  pool.trim();
  EXPECT_EQ(pool.stats().bytes_cached, 0u);
  EXPECT_EQ(pool.stats().frees, 5u);
}

TEST(BufferPoolTest, UniformBlocksAreTheLargestRequestsSizeAndServeAnyRequest) {
  BufferPool pool({.max_cached_bytes = 1 << 20, .uniform = true});
  const std::size_t middle = BufferPool::size_class(16384), large = BufferPool::size_class(65536);
  Buffer held = pool.acquire(16384);  // in use while the size grows
  EXPECT_EQ(held.capacity(), middle);
  {
    Buffer a = pool.acquire(4096);
    EXPECT_EQ(a.capacity(), middle) << "at least the largest so far";
  }
  EXPECT_EQ(pool.stats().bytes_cached, middle);
  { Buffer b = pool.acquire(65536); }  // the size grows: the cached smaller block is freed
  EXPECT_EQ(pool.stats().bytes_cached, large);
  EXPECT_EQ(pool.stats().frees, 1u);
  held.reset();  // outgrown as it comes back: freed, not cached
  EXPECT_EQ(pool.stats().bytes_cached, large);
  EXPECT_EQ(pool.stats().frees, 2u);
  Buffer small = pool.acquire(10);  // the cached large block serves it; size() stays its own
  EXPECT_EQ(small.capacity(), large);
  EXPECT_EQ(small.size(), 10u);
  EXPECT_EQ(pool.stats().allocations, 3u);
}

TEST(BufferPoolTest, MoveTransfersOwnershipOnce) {
  BufferPool pool;
  Buffer a = pool.acquire(10);
  std::byte* p = a.data();
  Buffer b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.data(), p);
  Buffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  c.reset();
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
}

TEST(BufferPoolTest, ResizeStaysWithinCapacity) {
  BufferPool pool;
  Buffer b = pool.acquire(5000);
  EXPECT_TRUE(b.resize(b.capacity()));
  EXPECT_EQ(b.size(), b.capacity());
  EXPECT_FALSE(b.resize(b.capacity() + 1));
  EXPECT_EQ(b.size(), b.capacity());
}

TEST(BufferPoolTest, BufferMayOutliveItsPool) {
  Buffer survivor;
  {
    BufferPool pool;
    survivor = pool.acquire(1 << 20);
    std::memset(survivor.data(), 1, survivor.size());
  }
  EXPECT_EQ(survivor.size(), 1u << 20);
  survivor.reset();  // must free through the pool state it kept alive (ASan/LSan would tell)
}

class CountingAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    ++allocations;
    return heap_allocator()->allocate(bytes, alignment);
  }
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    ++deallocations;
    heap_allocator()->deallocate(p, bytes, alignment);
  }
  const char* name() const override { return "counting"; }
  std::atomic<int> allocations{0}, deallocations{0};
};

TEST(BufferPoolTest, UsesThePluggedAllocatorAndReturnsEverything) {
  auto allocator = std::make_shared<CountingAllocator>();
  {
    BufferPool pool({.allocator = allocator});
    std::vector<Buffer> held;
    for (int i = 0; i < 10; ++i) held.push_back(pool.acquire(1000 * (i + 1)));
    held.clear();
    for (int i = 0; i < 10; ++i) held.push_back(pool.acquire(1000 * (i + 1)));
  }
  EXPECT_GT(allocator->allocations.load(), 0);
  EXPECT_EQ(allocator->allocations.load(), allocator->deallocations.load());
}

TEST(BufferPoolTest, ConcurrentAcquireAndReleaseKeepsTheBooksStraight) {
  BufferPool pool({.max_cached_bytes = 1 << 20});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        Buffer b = pool.acquire(static_cast<std::size_t>((i * 7 + t) % 64 + 1) * 1024);
        b.data()[0] = std::byte{1};
      }
    });
  }
  for (auto& th : threads) th.join();
  const BufferPoolStats s = pool.stats();
  EXPECT_EQ(s.acquires, 8000u);
  EXPECT_EQ(s.reuses + s.allocations, s.acquires);
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_LE(s.bytes_cached, std::size_t{1} << 20);
}

// The batcher's wait for the trainer's previous batch: at once when few enough buffers are live,
// the whole bound when none comes back, and as soon as one does.
TEST(BufferPoolTest, WaitingForLiveBuffersEndsWhenOneComesBackOrAtTheBound) {
  BufferPool pool;
  Buffer a = pool.acquire(1000), b = pool.acquire(1000);
  EXPECT_TRUE(pool.wait_until_live_at_most(2, std::chrono::milliseconds(0)));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(pool.wait_until_live_at_most(1, std::chrono::milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  std::thread trainer([&] { a.reset(); });
  EXPECT_TRUE(pool.wait_until_live_at_most(1, std::chrono::minutes(1)));
  trainer.join();
  b.reset();
  EXPECT_TRUE(pool.wait_until_live_at_most(0, std::chrono::milliseconds(0)));
  Buffer c = pool.acquire(1000);  // a reused block is live again
  EXPECT_FALSE(pool.wait_until_live_at_most(0, std::chrono::milliseconds(0)));
}

}  // namespace
}  // namespace mmfeed::core
