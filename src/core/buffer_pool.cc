#include "core/buffer_pool.h"

#include "core/scratch.h"

#include <sys/mman.h>

#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

namespace mmfeed::core {

namespace {

// Blocks of 4 MiB or more (a batch, a decoded photo) are mapped on 2 MiB boundaries and
// marked for transparent huge pages: first touch then faults once per 2 MiB instead of once
// per 4 KiB page, which on a loader's working set of fresh buffers is most of the kernel time.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugeMin = std::size_t{4} << 20;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

class HeapAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    if (bytes < kHugeMin || alignment > kHugePage) return ::operator new(bytes, std::align_val_t(alignment));
    const std::size_t length = round_up(bytes, kHugePage);
    void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = round_up(start, kHugePage);
    if (aligned > start) munmap(raw, aligned - start);
    if (const std::uintptr_t tail = start + length + kHugePage - (aligned + length); tail > 0) {
      munmap(reinterpret_cast<void*>(aligned + length), tail);
    }
    madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // advisory: ignored where THP is off
    return reinterpret_cast<void*>(aligned);
  }
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment) override {
    if (bytes < kHugeMin || alignment > kHugePage) {
      ::operator delete(ptr, std::align_val_t(alignment));
    } else {
      munmap(ptr, round_up(bytes, kHugePage));
    }
  }
  const char* name() const override { return "heap"; }
};

constexpr std::size_t kMinClass = 4096;

}  // namespace

std::shared_ptr<Allocator> heap_allocator() {
  static const std::shared_ptr<Allocator> allocator = std::make_shared<HeapAllocator>();
  return allocator;
}

namespace detail {

class PoolState {
 public:
  explicit PoolState(BufferPoolOptions options) : options_(std::move(options)) {
    if (!options_.allocator) options_.allocator = heap_allocator();
    if (!std::has_single_bit(options_.alignment)) {
      throw std::invalid_argument("buffer pool alignment must be a power of two");
    }
  }
  ~PoolState() { trim(); }

  // With options.uniform: the class every block has from now on (at least `capacity`); the
  // cached blocks smaller than it are freed when it grows. Else `capacity`.
  std::size_t uniform_class(std::size_t capacity) {
    if (!options_.uniform) return capacity;
    {
      std::lock_guard lock(mu_);
      if (capacity <= uniform_) return uniform_;
      uniform_ = capacity;
    }
    trim(capacity);
    return capacity;
  }

  // A block of `capacity` bytes, or with `fit`, the smallest cached block at least that large
  // (its class is stored in *capacity then): batches vary in size from one to the next, and a
  // cached block is resident already, so lending a larger one costs no memory, while a fresh
  // one costs a page fault and a zero fill per page.
  // `max_ratio` bounds how much larger than asked a reused block may be (0: no bound).
  std::byte* take(std::size_t* capacity, bool fit, std::size_t max_ratio = 0) {
    {
      std::lock_guard lock(mu_);
      ++stats_.acquires;
      // free_ holds no empty lists: the first entry at or above the class is the best fit.
      auto it = fit ? free_.lower_bound(*capacity) : free_.find(*capacity);
      if (it != free_.end() && (max_ratio == 0 || it->first <= *capacity * max_ratio)) {
        *capacity = it->first;
        std::byte* block = it->second.back();
        it->second.pop_back();
        if (it->second.empty()) free_.erase(it);
        stats_.bytes_cached -= *capacity;
        ++stats_.reuses;
        note_in_use(*capacity);
        return block;
      }
      ++stats_.allocations;
      note_in_use(*capacity);
    }
    return static_cast<std::byte*>(options_.allocator->allocate(*capacity, options_.alignment));
  }

  // Caches the block if it fits the budget, evicting smaller cached blocks first if that makes
  // room (a pool whose requests grow keeps the blocks that can still serve them).
  void give_back(std::byte* block, std::size_t capacity) {
    std::vector<std::pair<std::byte*, std::size_t>> evicted;
    {
      std::lock_guard lock(mu_);
      stats_.bytes_in_use -= capacity;
      --live_;
      released_.notify_all();
      const bool outgrown = options_.uniform && capacity < uniform_;  // no request can use it
      std::size_t smaller = 0;
      for (auto it = free_.begin(); it != free_.end() && it->first < capacity; ++it)
        smaller += it->first * it->second.size();
      if (!outgrown && capacity <= options_.max_cached_bytes &&
          stats_.bytes_cached - smaller + capacity <= options_.max_cached_bytes) {
        while (stats_.bytes_cached + capacity > options_.max_cached_bytes) {
          auto it = free_.begin();
          evicted.emplace_back(it->second.back(), it->first);
          it->second.pop_back();
          stats_.bytes_cached -= it->first;
          ++stats_.frees;
          if (it->second.empty()) free_.erase(it);
        }
        free_[capacity].push_back(block);
        stats_.bytes_cached += capacity;
        block = nullptr;
      } else {
        ++stats_.frees;
      }
    }
    for (auto [b, c] : evicted) options_.allocator->deallocate(b, c, options_.alignment);
    if (block != nullptr) options_.allocator->deallocate(block, capacity, options_.alignment);
  }

  void trim(std::size_t below = std::numeric_limits<std::size_t>::max()) {
    std::map<std::size_t, std::vector<std::byte*>> drop;
    {
      std::lock_guard lock(mu_);
      while (!free_.empty() && free_.begin()->first < below) drop.insert(free_.extract(free_.begin()));
      for (auto& [capacity, blocks] : drop) {
        stats_.frees += blocks.size();
        stats_.bytes_cached -= capacity * blocks.size();
      }
    }
    for (auto& [capacity, blocks] : drop) {
      for (std::byte* block : blocks) options_.allocator->deallocate(block, capacity, options_.alignment);
    }
  }

  BufferPoolStats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }

  bool wait_until_live_at_most(std::size_t blocks, std::chrono::milliseconds bound) {
    std::unique_lock lock(mu_);
    return released_.wait_for(lock, bound, [&] { return live_ <= blocks; });
  }

 private:
  void note_in_use(std::size_t capacity) {
    ++live_;
    stats_.bytes_in_use += capacity;
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

  BufferPoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable released_;                     // a live block came back
  std::size_t live_ = 0;                                 // blocks taken and not given back
  std::map<std::size_t, std::vector<std::byte*>> free_;  // capacity -> cached blocks
  BufferPoolStats stats_;
  std::size_t uniform_ = 0;  // with options_.uniform: every block's class now
};

}  // namespace detail

Buffer::Buffer(Buffer&& other) noexcept
    : pool_(std::move(other.pool_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::move(other.pool_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

bool Buffer::resize(std::size_t size) {
  if (size > capacity_) return false;
  size_ = size;
  return true;
}

void Buffer::reset() {
  if (data_ != nullptr) pool_->give_back(data_, capacity_);
  pool_.reset();
  data_ = nullptr;
  size_ = 0;
  capacity_ = 0;
}

BufferPool::BufferPool(BufferPoolOptions options) : state_(std::make_shared<detail::PoolState>(std::move(options))) {}

std::size_t BufferPool::size_class(std::size_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  // Four classes per octave: 2^k * {4, 5, 6, 7} / 4.
  const int k = static_cast<int>(std::bit_width(bytes - 1)) - 1;  // 2^k < bytes <= 2^(k+1)
  const std::size_t quarter = std::size_t{1} << (k - 2);
  const std::size_t base = std::size_t{1} << k;
  return base + ((bytes - base + quarter - 1) / quarter) * quarter;
}

Buffer BufferPool::acquire(std::size_t bytes) {
  std::size_t capacity = state_->uniform_class(size_class(bytes));
  std::byte* block = state_->take(&capacity, /*fit=*/true);
  return Buffer(state_, block, bytes, capacity);
}

std::byte* BufferPool::take(std::size_t* capacity) {
  *capacity = size_class(*capacity);
  return state_->take(capacity, /*fit=*/true, /*max_ratio=*/4);
}

void BufferPool::give_back(std::byte* block, std::size_t capacity) { state_->give_back(block, capacity); }

void BufferPool::trim() { state_->trim(); }

bool BufferPool::wait_until_live_at_most(std::size_t blocks, std::chrono::milliseconds bound) {
  return state_->wait_until_live_at_most(blocks, bound);
}

BufferPoolStats BufferPool::stats() const { return state_->stats(); }

namespace {

BufferPool& scratch_pool() {
  // Never destroyed: scratch vectors in static objects may be freed after main returns.
  static BufferPool* pool = new BufferPool({.alignment = 64, .max_cached_bytes = kScratchCacheBytes});
  return *pool;
}

}  // namespace

// Each scratch block starts with a 64-byte header holding its capacity (a best-fit block may be
// larger than asked), so deallocation needs only the pointer.
constexpr std::size_t kScratchHeader = 64;

std::byte* take_scratch(std::size_t bytes) {
  std::size_t capacity = bytes + kScratchHeader;
  std::byte* block = scratch_pool().take(&capacity);
  std::memcpy(block, &capacity, sizeof capacity);
  return block + kScratchHeader;
}

void give_scratch(std::byte* data) {
  std::byte* block = data - kScratchHeader;
  std::size_t capacity = 0;
  std::memcpy(&capacity, block, sizeof capacity);
  scratch_pool().give_back(block, capacity);
}

}  // namespace mmfeed::core
