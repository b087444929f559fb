// The CUDA runtime, found at run time: mmfeed has no build-time CUDA dependency. When
// libcudart can be loaded and reports a device, batch buffers can be page-locked (pinned) so a
// host-to-device copy runs at full speed and asynchronously, and the copy stage
// (device/copy_stage.h) can put batches on a GPU; otherwise everything runs on pageable memory
// and says so. MMFEED_CUDART names the library to use instead of the lookup (the tests' own
// runtime, tests/device/test_cudart.cc, is found that way).
//
// At exit: the runtime tears itself down in an atexit handler. A batch freed after that (held
// by a static object, or by a library's own static state, as the process ends) must not call
// into it. mmfeed registers its own handler after the runtime has started (after its first
// call, and again after the first page-locked or device allocation, when it creates a
// context), so it runs first; from then on every release below is skipped and the memory is
// knowingly left to the operating system, which takes it back with the process.
//
// Example:
//   const CudaRuntime& cuda = CudaRuntime::get();
//   int device = choose_pin_device(-1, std::getenv("LOCAL_RANK"), cuda.device_count());
//   BufferPool pool({.allocator = host_allocator(device, std::make_shared<ThreadPool>("cuda-pin", 1))});
//   std::cout << cuda.describe();   // "CUDA runtime 12040 (...), 1 device: ..." or why it is absent
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/buffer_pool.h"
#include "core/thread_pool.h"

namespace mmfeed::device {

class CudaRuntime {
 public:
  // Loads libcudart once per process (thread-safe). A runtime the process has loaded already
  // (PyTorch's, when torch was imported first) is preferred, so that both share one runtime.
  static const CudaRuntime& get();

  bool available() const { return available_; }
  int device_count() const { return devices_; }
  // "CUDA runtime 12040 (/path/libcudart.so.12), 1 device: pinned batch memory", or the
  // reason it is unavailable.
  const std::string& describe() const { return description_; }

  // Page-locked host memory, pinned for every device, allocated with `device` made current in
  // the calling thread (so that no context is created on another GPU); nullptr on failure.
  void* host_alloc(std::size_t bytes, int device) const;
  // Frees what host_alloc returned.
  void host_free(void* p) const;

  // The copy stage's calls. Each returns the runtime's status (0: success) and clears the
  // calling thread's last error when it fails; the releases do nothing once exiting().
  bool copies_available() const { return copies_available_; }
  int set_device(int device) const;
  int get_device(int* device) const;
  int device_alloc(void** p, std::size_t bytes) const;  // on the calling thread's current device
  void device_free(void* p) const;
  int stream_create(void** stream) const;  // a non-blocking stream on the current device
  void stream_destroy(void* stream) const;
  int event_create(void** event) const;  // without timing
  void event_destroy(void* event) const;
  int event_record(void* event, void* stream) const;
  int event_synchronize(void* event) const;
  int stream_wait_event(void* stream, void* event) const;
  // Host to device: asynchronous on `stream` from page-locked `src`, else synchronous.
  int copy_to_device(void* dst, const void* src, std::size_t bytes, void* stream, bool src_pinned) const;
  // Whether `p` lies in page-locked host memory the runtime knows.
  bool is_pinned(const void* p) const;
  // "cudaMalloc: out of memory (2)".
  std::string error_text(const char* call, int status) const;

  // The process is past its atexit handlers: the runtime may be gone, nothing calls it.
  static bool exiting();

 private:
  CudaRuntime();
  void clear_error() const;       // cudaGetLastError: resets the calling thread's last error
  int checked(int status) const;  // clear_error() when status != 0
  static void guard_exit();       // registers the exit handler (see the top of this file)

  bool available_ = false;
  bool copies_available_ = false;
  int devices_ = 0;
  std::string description_;
  void* handle_ = nullptr;
  int (*set_device_)(int) = nullptr;
  int (*get_device_)(int*) = nullptr;
  int (*host_alloc_)(void**, std::size_t, unsigned int) = nullptr;
  int (*free_host_)(void*) = nullptr;
  int (*clear_error_)() = nullptr;
  const char* (*error_string_)(int) = nullptr;
  int (*malloc_)(void**, std::size_t) = nullptr;
  int (*free_)(void*) = nullptr;
  int (*stream_create_)(void**, unsigned int) = nullptr;
  int (*stream_destroy_)(void*) = nullptr;
  int (*event_create_)(void**, unsigned int) = nullptr;
  int (*event_destroy_)(void*) = nullptr;
  int (*event_record_)(void*, void*) = nullptr;
  int (*event_synchronize_)(void*) = nullptr;
  int (*stream_wait_event_)(void*, void*, unsigned int) = nullptr;
  int (*memcpy_async_)(void*, const void*, std::size_t, int, void*) = nullptr;
  int (*memcpy_)(void*, const void*, std::size_t, int) = nullptr;
  int (*pointer_attributes_)(void*, const void*) = nullptr;
};

// The device whose context allocates pinned memory: `requested` when it is >= 0; otherwise the
// launcher's LOCAL_RANK (torchrun and Megatron put local rank r on GPU r) when it names one of
// `device_count` devices; otherwise 0. Without this every rank on a node would create a
// context, and hold its memory, on GPU 0.
int choose_pin_device(int requested, const char* local_rank, int device_count);

// A BufferPool allocator that page-locks each block through `pin`, and takes a block `pin`
// refuses (page-locked memory is a scarce, capped resource) from the heap instead, remembering
// which blocks came from where so that each is freed by its own allocator.
class PinnedAllocator final : public core::Allocator {
 public:
  using Pin = std::function<void*(std::size_t bytes)>;
  using Unpin = std::function<void(void* p)>;
  PinnedAllocator(Pin pin, Unpin unpin);

  void* allocate(std::size_t bytes, std::size_t alignment) override;
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  const char* name() const override { return "cuda-pinned"; }

  // Blocks taken from the heap because `pin` refused them, since construction.
  std::size_t pageable_blocks() const { return pageable_blocks_.load(std::memory_order_relaxed); }

 private:
  Pin pin_;
  Unpin unpin_;
  std::mutex mutex_;
  std::unordered_set<void*> from_heap_;
  std::atomic<std::size_t> pageable_blocks_{0};
};

// The batch buffers' allocator: a PinnedAllocator on `device` when the CUDA runtime is
// available, the heap otherwise. Its runtime calls run on `thread` (one worker, kept as long as
// the allocator), whose current device becomes `device`: the threads that acquire and release
// batch buffers (the trainer's among them, in serial mode or when it frees the last tensor)
// keep their current device and open no context. Blocks are few and reused, so the hop costs
// nothing next to cudaHostAlloc itself.
std::shared_ptr<core::Allocator> host_allocator(int device, std::shared_ptr<core::ThreadPool> thread);

}  // namespace mmfeed::device
