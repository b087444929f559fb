#include "device/cuda_runtime.h"

#include <dlfcn.h>

#include <cstdlib>

namespace mmfeed::device {

namespace {

class PinnedAllocator final : public core::Allocator {
 public:
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = CudaRuntime::get().host_alloc(bytes);  // page aligned, which covers `alignment`
    if (p == nullptr) return core::heap_allocator()->allocate(bytes, alignment);
    return p;
  }
  void deallocate(void* p, std::size_t, std::size_t) override { CudaRuntime::get().host_free(p); }
  const char* name() const override { return "cuda-pinned"; }
};

}  // namespace

CudaRuntime::CudaRuntime() {
  const char* override_path = std::getenv("MMFEED_CUDART");
  for (const char* name : {override_path, "libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
    if (name == nullptr || *name == '\0') continue;
    handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) break;
  }
  if (handle_ == nullptr) {
    description_ = "no CUDA runtime (libcudart not found): pageable memory";
    return;
  }
  auto count = reinterpret_cast<int (*)(int*)>(dlsym(handle_, "cudaGetDeviceCount"));
  auto version = reinterpret_cast<int (*)(int*)>(dlsym(handle_, "cudaRuntimeGetVersion"));
  host_alloc_ = reinterpret_cast<int (*)(void**, std::size_t, unsigned int)>(dlsym(handle_, "cudaHostAlloc"));
  free_host_ = reinterpret_cast<int (*)(void*)>(dlsym(handle_, "cudaFreeHost"));
  if (count == nullptr || host_alloc_ == nullptr || free_host_ == nullptr) {
    description_ = "CUDA runtime lacks cudaGetDeviceCount/cudaHostAlloc/cudaFreeHost: pageable memory";
    return;
  }
  int devices = 0;
  if (count(&devices) != 0 || devices == 0) {
    description_ = "CUDA runtime present but no device: pageable memory";
    return;
  }
  int v = 0;
  if (version != nullptr) version(&v);
  devices_ = devices;
  available_ = true;
  description_ = "CUDA runtime " + std::to_string(v) + ", " + std::to_string(devices) + " device" +
                 (devices == 1 ? "" : "s") + ": pinned batch memory";
}

const CudaRuntime& CudaRuntime::get() {
  static const CudaRuntime runtime;
  return runtime;
}

void* CudaRuntime::host_alloc(std::size_t bytes) const {
  if (!available_) return nullptr;
  void* p = nullptr;
  return host_alloc_(&p, bytes, 0) == 0 ? p : nullptr;
}

void CudaRuntime::host_free(void* p) const {
  if (available_ && free_host_(p) == 0) return;
  core::heap_allocator()->deallocate(p, 0, 64);
}

std::shared_ptr<core::Allocator> host_allocator() {
  if (!CudaRuntime::get().available()) return core::heap_allocator();
  static const std::shared_ptr<core::Allocator> pinned = std::make_shared<PinnedAllocator>();
  return pinned;
}

}  // namespace mmfeed::device
