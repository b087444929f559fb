#include "device/cuda_runtime.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "core/buffer_pool.h"

namespace mmfeed::device {
namespace {

TEST(PinDeviceTest, AnExplicitDeviceWinsThenLocalRankThenZero) {
  EXPECT_EQ(choose_pin_device(3, "1", 8), 3);
  EXPECT_EQ(choose_pin_device(-1, "5", 8), 5);
  EXPECT_EQ(choose_pin_device(-1, "0", 8), 0);
  EXPECT_EQ(choose_pin_device(-1, nullptr, 8), 0);
  // Each rank sees only its own GPU (CUDA_VISIBLE_DEVICES): local rank 5 is device 0 there.
  EXPECT_EQ(choose_pin_device(-1, "5", 1), 0);
  EXPECT_EQ(choose_pin_device(-1, "1", 0), 0);
  for (const char* junk : {"", "-1", "2x", " 2", "99999999999999999999"}) {
    EXPECT_EQ(choose_pin_device(-1, junk, 8), 0) << junk;
  }
}

// Page-locking stand-in with the runtime's contract (page-aligned blocks, its own free) that
// refuses every other request, as a runtime out of page-locked memory does.
class RefusingPinner {
 public:
  void* pin(std::size_t bytes) {
    std::lock_guard lock(mu_);
    if (++calls_ % 2 == 0) return nullptr;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    live_.emplace(p, bytes);
    return p;
  }
  void unpin(void* p) {
    std::lock_guard lock(mu_);
    const auto it = live_.lower_bound({p, 0});
    ASSERT_TRUE(it != live_.end() && it->first == p) << "unpin got a block pin never gave";
    munmap(p, it->second);
    live_.erase(it);
    ++unpinned_;
  }
  std::size_t live() {
    std::lock_guard lock(mu_);
    return live_.size();
  }
  int unpinned() {
    std::lock_guard lock(mu_);
    return unpinned_;
  }

 private:
  std::mutex mu_;
  int calls_ = 0;
  int unpinned_ = 0;
  std::set<std::pair<void*, std::size_t>> live_;
};

TEST(PinnedAllocatorTest, RefusedBlocksComeFromTheHeapAndGoBackThere) {
  RefusingPinner pinner;
  auto allocator = std::make_shared<PinnedAllocator>([&](std::size_t n) { return pinner.pin(n); },
                                                     [&](void* p) { pinner.unpin(p); });
  // Small blocks (operator new) and large ones (the heap's huge-page mmap path), half refused.
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t bytes : {4096u, 8192u, 1u << 20, 3u << 20, 8u << 20, 12u << 20}) {
    void* p = allocator->allocate(bytes, 64);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
    std::memset(p, 0x5A, bytes);
    blocks.emplace_back(p, bytes);
  }
  EXPECT_EQ(allocator->pageable_blocks(), 3u);
  EXPECT_EQ(pinner.live(), 3u);
  for (auto [p, bytes] : blocks) allocator->deallocate(p, bytes, 64);
  EXPECT_EQ(pinner.live(), 0u);
  EXPECT_EQ(pinner.unpinned(), 3) << "only pinned blocks go back to the runtime";
}

TEST(PinnedAllocatorTest, ABufferPoolOverIt) {
  RefusingPinner pinner;
  auto allocator = std::make_shared<PinnedAllocator>([&](std::size_t n) { return pinner.pin(n); },
                                                     [&](void* p) { pinner.unpin(p); });
  {
    core::BufferPool pool({.max_cached_bytes = 16 << 20, .allocator = allocator});
    for (int round = 0; round < 20; ++round) {
      std::vector<core::Buffer> held;
      for (std::size_t bytes : {5000u, 70000u, 2u << 20, 6u << 20}) {
        held.push_back(pool.acquire(bytes + static_cast<std::size_t>(round) * 4096));
        std::memset(held.back().data(), round, held.back().size());
      }
    }
  }
  EXPECT_GT(allocator->pageable_blocks(), 0u);
  EXPECT_GT(pinner.unpinned(), 0);
  EXPECT_EQ(pinner.live(), 0u) << "the pool gave every pinned block back";
}

TEST(CudaRuntimeTest, SaysWhatItFound) {
  const CudaRuntime& cuda = CudaRuntime::get();
  if (cuda.available()) {
    EXPECT_GT(cuda.device_count(), 0);
    EXPECT_NE(cuda.describe().find("pinned batch memory"), std::string::npos) << cuda.describe();
    void* p = cuda.host_alloc(1 << 20, 0);
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, 1 << 20);
    cuda.host_free(p);
    auto allocator = host_allocator(0, std::make_shared<core::ThreadPool>("cuda-pin", 1));
    void* block = allocator->allocate(8 << 20, 64);
    std::memset(block, 2, 8 << 20);
    allocator->deallocate(block, 8 << 20, 64);
    EXPECT_EQ(dynamic_cast<PinnedAllocator&>(*allocator).pageable_blocks(), 0u);
  } else {
    EXPECT_EQ(cuda.device_count(), 0);
    EXPECT_NE(cuda.describe().find("pageable memory"), std::string::npos) << cuda.describe();
    EXPECT_EQ(cuda.host_alloc(1 << 20, 0), nullptr);
    EXPECT_EQ(host_allocator(0, std::make_shared<core::ThreadPool>("cuda-pin", 1)), core::heap_allocator());
  }
}

}  // namespace
}  // namespace mmfeed::device
