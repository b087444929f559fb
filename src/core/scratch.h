// Scratch memory for the large, short-lived arrays of the CPU stages: decoded images, resize
// intermediates, a sample's patches.
//
// Each such array is tens of megabytes, lives for one sample and is written in full before it
// is read. With the plain heap every one is a fresh mmap: the kernel zero-fills and faults in
// every page, std::vector zero-fills it again, and munmap tears it down afterwards (on a
// 2-core machine that was 45% of the loader's CPU). ScratchVector avoids all three: elements
// are default-initialised (no zero fill), and blocks of 64 KiB or more come from one
// process-wide BufferPool whose cache (kScratchCacheBytes) hands the same warm pages to the
// next sample (the smallest cached block that fits, so sizes need not repeat exactly).
//
// Example:
//   ScratchVector<std::uint8_t> rgb(width * height * 3);  // uninitialised, pooled
//   decode_into(rgb.data());
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace mmfeed::core {

// Pooled memory for ScratchAllocator: at least `bytes`, 64-byte aligned, from the smallest
// cached block that fits.
std::byte* take_scratch(std::size_t bytes);
void give_scratch(std::byte* data);

inline constexpr std::size_t kScratchPoolMin = std::size_t{64} << 10;
// Released scratch memory kept for reuse, process-wide: about two workers' decode, resize and
// held-image buffers for 12 MP photos.
inline constexpr std::size_t kScratchCacheBytes = std::size_t{128} << 20;

template <class T>
class ScratchAllocator {
 public:
  using value_type = T;
  ScratchAllocator() noexcept = default;
  template <class U>
  ScratchAllocator(const ScratchAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kScratchPoolMin) return static_cast<T*>(::operator new(bytes, std::align_val_t(alignof(T))));
    return reinterpret_cast<T*>(take_scratch(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kScratchPoolMin) {
      ::operator delete(p, std::align_val_t(alignof(T)));
    } else {
      give_scratch(reinterpret_cast<std::byte*>(p));
    }
  }
  // Default-initialisation: resize() leaves trivial elements unwritten.
  template <class U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const ScratchAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using ScratchVector = std::vector<T, ScratchAllocator<T>>;

}  // namespace mmfeed::core
