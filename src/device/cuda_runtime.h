// The CUDA runtime, found at run time: mmfeed has no build-time CUDA dependency. When
// libcudart can be loaded and reports a device, batch buffers can be page-locked (pinned) so a
// host-to-device copy runs at full speed and asynchronously; otherwise everything runs on
// pageable memory and says so.
//
// Example:
//   const CudaRuntime& cuda = CudaRuntime::get();
//   if (cuda.available()) pool = BufferPool({.allocator = pinned_allocator()});
//   std::cout << cuda.describe();   // "CUDA runtime 12.4, 1 device" or why it is absent
#pragma once

#include <memory>
#include <string>

#include "core/buffer_pool.h"

namespace mmfeed::device {

class CudaRuntime {
 public:
  // Loads libcudart once per process (thread-safe).
  static const CudaRuntime& get();

  bool available() const { return available_; }
  int device_count() const { return devices_; }
  // "CUDA runtime 12040, 1 device", or the reason it is unavailable.
  const std::string& describe() const { return description_; }

  // Page-locked host memory; nullptr on failure.
  void* host_alloc(std::size_t bytes) const;
  void host_free(void* p) const;

 private:
  CudaRuntime();
  bool available_ = false;
  int devices_ = 0;
  std::string description_;
  void* handle_ = nullptr;
  int (*host_alloc_)(void**, std::size_t, unsigned int) = nullptr;
  int (*free_host_)(void*) = nullptr;
};

// An allocator for core::BufferPool: pinned memory when the CUDA runtime is available, the
// heap otherwise (its name() says which: "cuda-pinned" or "heap").
std::shared_ptr<core::Allocator> host_allocator();

}  // namespace mmfeed::device
