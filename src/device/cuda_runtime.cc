#include "device/cuda_runtime.h"

#include <dlfcn.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace mmfeed::device {

namespace {

constexpr unsigned kHostAllocPortable = 1;  // cudaHostAllocPortable: pinned for every context

// The sonames to try, newest first; the unversioned name (a toolkit's development link) last.
constexpr const char* kSonames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"};

void* open_runtime() {
  if (const char* path = std::getenv("MMFEED_CUDART"); path != nullptr && *path != '\0') {
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
  for (const char* name : kSonames) {  // one already in the process (torch's) first
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return handle;
  }
  for (const char* name : kSonames) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  return nullptr;
}

}  // namespace

CudaRuntime::CudaRuntime() {
  handle_ = open_runtime();
  if (handle_ == nullptr) {
    description_ = "no CUDA runtime (libcudart not found): pageable memory";
    return;
  }
  auto count = reinterpret_cast<int (*)(int*)>(dlsym(handle_, "cudaGetDeviceCount"));
  auto version = reinterpret_cast<int (*)(int*)>(dlsym(handle_, "cudaRuntimeGetVersion"));
  set_device_ = reinterpret_cast<int (*)(int)>(dlsym(handle_, "cudaSetDevice"));
  host_alloc_ = reinterpret_cast<int (*)(void**, std::size_t, unsigned int)>(dlsym(handle_, "cudaHostAlloc"));
  free_host_ = reinterpret_cast<int (*)(void*)>(dlsym(handle_, "cudaFreeHost"));
  clear_error_ = reinterpret_cast<int (*)()>(dlsym(handle_, "cudaGetLastError"));
  if (count == nullptr || set_device_ == nullptr || host_alloc_ == nullptr || free_host_ == nullptr) {
    description_ = "CUDA runtime lacks cudaGetDeviceCount/cudaSetDevice/cudaHostAlloc/cudaFreeHost: pageable memory";
    return;
  }
  // Which file the runtime came from (the process may hold several: torch's, a toolkit's).
  std::string path = "libcudart";
  if (Dl_info info; dladdr(reinterpret_cast<void*>(count), &info) != 0 && info.dli_fname != nullptr) {
    path = info.dli_fname;
  }
  int devices = 0;
  if (const int status = count(&devices); status != 0 || devices == 0) {
    description_ = "CUDA runtime " + path + " present but no device";
    if (status != 0) {
      auto error_string = reinterpret_cast<const char* (*)(int)>(dlsym(handle_, "cudaGetErrorString"));
      description_ += " (cudaGetDeviceCount: " +
                      (error_string != nullptr ? std::string(error_string(status)) : "error " + std::to_string(status)) +
                      ")";
    }
    description_ += ": pageable memory";
    clear_error();
    return;
  }
  int v = 0;
  if (version != nullptr) version(&v);
  devices_ = devices;
  available_ = true;
  description_ = "CUDA runtime " + std::to_string(v) + " (" + path + "), " + std::to_string(devices) + " device" +
                 (devices == 1 ? "" : "s") + ": pinned batch memory";
}

const CudaRuntime& CudaRuntime::get() {
  static const CudaRuntime runtime;
  return runtime;
}

void* CudaRuntime::host_alloc(std::size_t bytes, int device) const {
  if (!available_) return nullptr;
  void* p = nullptr;
  if (set_device_(device) != 0 || host_alloc_(&p, bytes, kHostAllocPortable) != 0) {
    clear_error();
    return nullptr;
  }
  return p;
}

void CudaRuntime::host_free(void* p) const {
  if (available_ && free_host_(p) != 0) clear_error();
}

void CudaRuntime::clear_error() const {
  // A failed call leaves its error as the thread's last one; in a runtime shared with torch,
  // torch's next kernel-launch check would report it as its own.
  if (clear_error_ != nullptr) clear_error_();
}

int choose_pin_device(int requested, const char* local_rank, int device_count) {
  if (requested >= 0) return requested;
  if (local_rank != nullptr) {
    int rank = -1;
    const char* end = local_rank + std::strlen(local_rank);
    if (auto [ptr, ec] = std::from_chars(local_rank, end, rank); ec == std::errc() && ptr == end && rank >= 0 &&
                                                                  rank < device_count) {
      return rank;
    }
  }
  return 0;
}

PinnedAllocator::PinnedAllocator(Pin pin, Unpin unpin) : pin_(std::move(pin)), unpin_(std::move(unpin)) {}

void* PinnedAllocator::allocate(std::size_t bytes, std::size_t alignment) {
  if (void* p = pin_(bytes)) return p;  // page aligned, which covers `alignment`
  void* p = core::heap_allocator()->allocate(bytes, alignment);
  std::lock_guard lock(mutex_);
  from_heap_.insert(p);
  pageable_blocks_.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void PinnedAllocator::deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  {
    std::lock_guard lock(mutex_);
    if (from_heap_.erase(p) == 0) {
      unpin_(p);
      return;
    }
  }
  core::heap_allocator()->deallocate(p, bytes, alignment);
}

std::shared_ptr<core::Allocator> host_allocator(int device, std::shared_ptr<core::ThreadPool> thread) {
  const CudaRuntime& cuda = CudaRuntime::get();
  if (!cuda.available()) return core::heap_allocator();
  return std::make_shared<PinnedAllocator>(
      [&cuda, device, thread](std::size_t bytes) {
        return thread->async([&cuda, device, bytes] { return cuda.host_alloc(bytes, device); }).get();
      },
      [&cuda, thread](void* p) { thread->async([&cuda, p] { cuda.host_free(p); }).get(); });
}

}  // namespace mmfeed::device
