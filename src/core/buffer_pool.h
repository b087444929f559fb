// Reusable aligned memory for fetched objects and batch tensors.
//
// A pipeline allocates the same few sizes over and over (a batch's pixel buffer, a fetched
// JPEG); returning them to a pool instead of the heap keeps page faults and allocator locks
// off the hot path and, with a pinning allocator, keeps pinned memory registered. Requests
// are rounded up to size classes (four per power of two, so at most 25% slack) and served by
// the smallest cached block at least that large (consecutive batches differ in size); released
// buffers stay cached up to a byte budget, beyond which they are freed.
//
// A Buffer keeps its pool's state alive, so a buffer may outlive the BufferPool object that
// made it (a batch still held by Python after the loader is gone).
//
// Example:
//   BufferPool pool({.alignment = 64, .max_cached_bytes = 1 << 30});
//   Buffer buf = pool.acquire(jpeg_size);
//   std::memcpy(buf.data(), bytes, jpeg_size);
//   // ~Buffer hands the memory back; the next acquire of a similar size reuses it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace mmfeed::core {

// Where a pool's memory comes from: the heap by default, pinned host memory when a CUDA
// runtime is present (src/device/).
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t bytes, std::size_t alignment) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes, std::size_t alignment) = 0;
  virtual const char* name() const = 0;
};

// Aligned heap memory (operator new with std::align_val_t).
std::shared_ptr<Allocator> heap_allocator();

struct BufferPoolOptions {
  std::size_t alignment = 64;                      // power of two
  std::size_t max_cached_bytes = 256 << 20;        // released memory kept for reuse
  std::shared_ptr<Allocator> allocator = nullptr;  // null: heap_allocator()
  // Every block the size class of the largest request so far: any free block then serves any
  // request, so a pool whose requests vary stops allocating once the largest has come and as
  // many blocks exist as are ever in use at once. Smaller blocks are freed as the size grows or
  // as they come back. For big, varying buffers (batches); a request's size() is still its own.
  bool uniform = false;
};

struct BufferPoolStats {
  std::uint64_t acquires = 0;
  std::uint64_t reuses = 0;       // acquires served from the cache
  std::uint64_t allocations = 0;  // acquires that asked the allocator
  std::uint64_t frees = 0;        // blocks returned to the allocator
  std::size_t bytes_in_use = 0;   // capacity of live buffers
  std::size_t peak_bytes_in_use = 0;
  std::size_t bytes_cached = 0;
};

namespace detail {
class PoolState;
}

// A move-only handle on pooled memory. size() is what was asked for; capacity() is the
// size class actually reserved. Destroying or reset()ting it returns the memory to its pool.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  std::span<std::byte> span() { return {data_, size_}; }
  std::span<const std::byte> span() const { return {data_, size_}; }
  bool empty() const { return data_ == nullptr; }

  // Changes size() within capacity(); returns false (and changes nothing) beyond it.
  bool resize(std::size_t size);

  // Returns the memory to the pool now.
  void reset();

 private:
  friend class BufferPool;
  Buffer(std::shared_ptr<detail::PoolState> pool, std::byte* data, std::size_t size, std::size_t capacity)
      : pool_(std::move(pool)), data_(data), size_(size), capacity_(capacity) {}

  std::shared_ptr<detail::PoolState> pool_;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

class BufferPool {
 public:
  explicit BufferPool(BufferPoolOptions options = {});

  // Memory for at least `bytes` bytes (a zero-byte request still gets a valid pointer),
  // aligned to options.alignment. Contents are unspecified.
  Buffer acquire(std::size_t bytes);

  // Frees every cached block.
  void trim();

  BufferPoolStats stats() const;

  // Waits until at most `blocks` buffers are live (acquired and not yet released), or `bound`
  // has passed; true when they are.
  bool wait_until_live_at_most(std::size_t blocks, std::chrono::milliseconds bound);

  // The raw form, for allocators (core/scratch.h): the smallest cached block of at least
  // *capacity bytes (and at most 4 times that), or a new one of its size class; *capacity
  // becomes the block's capacity, which give_back needs.
  std::byte* take(std::size_t* capacity);
  void give_back(std::byte* block, std::size_t capacity);

  // The capacity acquire(bytes) reserves when it allocates (a reused block may be larger).
  static std::size_t size_class(std::size_t bytes);

 private:
  std::shared_ptr<detail::PoolState> state_;
};

}  // namespace mmfeed::core
