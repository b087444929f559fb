#include "core/buffer_pool.h"

#include <bit>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

namespace mmfeed::core {

namespace {

class HeapAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    return ::operator new(bytes, std::align_val_t(alignment));
  }
  void deallocate(void* ptr, std::size_t, std::size_t alignment) override {
    ::operator delete(ptr, std::align_val_t(alignment));
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

  std::byte* take(std::size_t capacity) {
    {
      std::lock_guard lock(mu_);
      ++stats_.acquires;
      note_in_use(capacity);
      auto it = free_.find(capacity);
      if (it != free_.end() && !it->second.empty()) {
        std::byte* block = it->second.back();
        it->second.pop_back();
        stats_.bytes_cached -= capacity;
        ++stats_.reuses;
        return block;
      }
      ++stats_.allocations;
    }
    return static_cast<std::byte*>(options_.allocator->allocate(capacity, options_.alignment));
  }

  void give_back(std::byte* block, std::size_t capacity) {
    {
      std::lock_guard lock(mu_);
      stats_.bytes_in_use -= capacity;
      if (stats_.bytes_cached + capacity <= options_.max_cached_bytes) {
        free_[capacity].push_back(block);
        stats_.bytes_cached += capacity;
        return;
      }
      ++stats_.frees;
    }
    options_.allocator->deallocate(block, capacity, options_.alignment);
  }

  void trim() {
    std::map<std::size_t, std::vector<std::byte*>> drop;
    {
      std::lock_guard lock(mu_);
      drop.swap(free_);
      for (auto& [capacity, blocks] : drop) stats_.frees += blocks.size();
      stats_.bytes_cached = 0;
    }
    for (auto& [capacity, blocks] : drop) {
      for (std::byte* block : blocks) options_.allocator->deallocate(block, capacity, options_.alignment);
    }
  }

  BufferPoolStats stats() const {
    std::lock_guard lock(mu_);
    return stats_;
  }

 private:
  void note_in_use(std::size_t capacity) {
    stats_.bytes_in_use += capacity;
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

  BufferPoolOptions options_;
  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<std::byte*>> free_;  // capacity -> cached blocks
  BufferPoolStats stats_;
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

BufferPool::BufferPool(BufferPoolOptions options)
    : state_(std::make_shared<detail::PoolState>(std::move(options))) {}

std::size_t BufferPool::size_class(std::size_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  // Four classes per octave: 2^k * {4, 5, 6, 7} / 4.
  const int k = std::bit_width(bytes - 1) - 1;  // 2^k < bytes <= 2^(k+1)
  const std::size_t quarter = std::size_t{1} << (k - 2);
  const std::size_t base = std::size_t{1} << k;
  return base + ((bytes - base + quarter - 1) / quarter) * quarter;
}

Buffer BufferPool::acquire(std::size_t bytes) {
  const std::size_t capacity = size_class(bytes);
  return Buffer(state_, state_->take(capacity), bytes, capacity);
}

void BufferPool::trim() { state_->trim(); }

BufferPoolStats BufferPool::stats() const { return state_->stats(); }

}  // namespace mmfeed::core
