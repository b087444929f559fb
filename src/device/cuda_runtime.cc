#include "device/cuda_runtime.h"

#include <dlfcn.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace mmfeed::device {

namespace {

constexpr unsigned kHostAllocPortable = 1;   // cudaHostAllocPortable: pinned for every context
constexpr unsigned kStreamNonBlocking = 1;   // cudaStreamNonBlocking: no implicit sync with stream 0
constexpr unsigned kEventDisableTiming = 2;  // cudaEventDisableTiming: the lightest event
constexpr int kMemcpyHostToDevice = 1;
constexpr int kMemoryTypeHost = 1;  // cudaPointerAttributes::type of page-locked host memory

// cudaPointerAttributes as CUDA 11 and later lay it out.
struct PointerAttributes {
  int type;
  int device;
  void* device_pointer;
  void* host_pointer;
};

std::atomic<bool> g_exiting{false};

template <class F>
void bind(void* handle, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
}

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
  bind(handle_, set_device_, "cudaSetDevice");
  bind(handle_, get_device_, "cudaGetDevice");
  bind(handle_, host_alloc_, "cudaHostAlloc");
  bind(handle_, free_host_, "cudaFreeHost");
  bind(handle_, clear_error_, "cudaGetLastError");
  bind(handle_, error_string_, "cudaGetErrorString");
  bind(handle_, malloc_, "cudaMalloc");
  bind(handle_, free_, "cudaFree");
  bind(handle_, stream_create_, "cudaStreamCreateWithFlags");
  bind(handle_, stream_destroy_, "cudaStreamDestroy");
  bind(handle_, event_create_, "cudaEventCreateWithFlags");
  bind(handle_, event_destroy_, "cudaEventDestroy");
  bind(handle_, event_record_, "cudaEventRecord");
  bind(handle_, event_synchronize_, "cudaEventSynchronize");
  bind(handle_, stream_wait_event_, "cudaStreamWaitEvent");
  bind(handle_, memcpy_async_, "cudaMemcpyAsync");
  bind(handle_, memcpy_, "cudaMemcpy");
  bind(handle_, pointer_attributes_, "cudaPointerGetAttributes");
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
  const int status = count(&devices);
  guard_exit();  // the runtime has started: its teardown is registered
  if (status != 0 || devices == 0) {
    description_ = "CUDA runtime " + path + " present but no device";
    if (status != 0) description_ += " (" + error_text("cudaGetDeviceCount", status) + ")";
    description_ += ": pageable memory";
    clear_error();
    return;
  }
  int v = 0;
  if (version != nullptr) version(&v);
  devices_ = devices;
  available_ = true;
  copies_available_ = get_device_ != nullptr && malloc_ != nullptr && free_ != nullptr && stream_create_ != nullptr &&
                      stream_destroy_ != nullptr && event_create_ != nullptr && event_destroy_ != nullptr &&
                      event_record_ != nullptr && event_synchronize_ != nullptr && stream_wait_event_ != nullptr &&
                      memcpy_async_ != nullptr && memcpy_ != nullptr && pointer_attributes_ != nullptr;
  description_ = "CUDA runtime " + std::to_string(v) + " (" + path + "), " + std::to_string(devices) + " device" +
                 (devices == 1 ? "" : "s") + ": pinned batch memory";
}

const CudaRuntime& CudaRuntime::get() {
  static const CudaRuntime runtime;
  return runtime;
}

void* CudaRuntime::host_alloc(std::size_t bytes, int device) const {
  if (!available_ || exiting()) return nullptr;
  void* p = nullptr;
  if (set_device_(device) != 0 || host_alloc_(&p, bytes, kHostAllocPortable) != 0) {
    clear_error();
    return nullptr;
  }
  guard_exit();  // the first page-locked block created a context
  return p;
}

void CudaRuntime::host_free(void* p) const {
  if (available_ && !exiting() && free_host_(p) != 0) clear_error();
}

bool CudaRuntime::exiting() { return g_exiting.load(std::memory_order_acquire); }

void CudaRuntime::guard_exit() {
  // Once after the runtime's start and once after its first context: whichever of the two the
  // runtime registers its teardown at, one of ours is registered later and so runs earlier.
  static std::atomic<int> registered{0};
  if (registered.load() >= 2 || registered.fetch_add(1) >= 2) return;
  std::atexit([] { g_exiting.store(true, std::memory_order_release); });
}

int CudaRuntime::checked(int status) const {
  if (status != 0) clear_error();
  return status;
}

int CudaRuntime::set_device(int device) const { return checked(set_device_(device)); }

int CudaRuntime::get_device(int* device) const { return checked(get_device_(device)); }

int CudaRuntime::device_alloc(void** p, std::size_t bytes) const {
  const int status = checked(malloc_(p, bytes));
  if (status == 0) guard_exit();
  return status;
}

void CudaRuntime::device_free(void* p) const {
  if (!exiting()) checked(free_(p));
}

int CudaRuntime::stream_create(void** stream) const { return checked(stream_create_(stream, kStreamNonBlocking)); }

void CudaRuntime::stream_destroy(void* stream) const {
  if (!exiting()) checked(stream_destroy_(stream));
}

int CudaRuntime::event_create(void** event) const { return checked(event_create_(event, kEventDisableTiming)); }

void CudaRuntime::event_destroy(void* event) const {
  if (!exiting()) checked(event_destroy_(event));
}

int CudaRuntime::event_record(void* event, void* stream) const {
  return exiting() ? 0 : checked(event_record_(event, stream));
}

int CudaRuntime::event_synchronize(void* event) const { return checked(event_synchronize_(event)); }

int CudaRuntime::stream_wait_event(void* stream, void* event) const {
  return checked(stream_wait_event_(stream, event, 0));
}

int CudaRuntime::copy_to_device(void* dst, const void* src, std::size_t bytes, void* stream, bool src_pinned) const {
  if (src_pinned) return checked(memcpy_async_(dst, src, bytes, kMemcpyHostToDevice, stream));
  return checked(memcpy_(dst, src, bytes, kMemcpyHostToDevice));
}

bool CudaRuntime::is_pinned(const void* p) const {
  if (!available_ || pointer_attributes_ == nullptr) return false;
  PointerAttributes attributes{};
  if (checked(pointer_attributes_(&attributes, p)) != 0) return false;
  return attributes.type == kMemoryTypeHost;
}

std::string CudaRuntime::error_text(const char* call, int status) const {
  const std::string what = error_string_ != nullptr ? error_string_(status) : "error";
  return std::string(call) + ": " + what + " (" + std::to_string(status) + ")";
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
    if (auto [ptr, ec] = std::from_chars(local_rank, end, rank);
        ec == std::errc() && ptr == end && rank >= 0 && rank < device_count) {
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
      [&cuda, thread](void* p) {
        if (CudaRuntime::exiting()) return;  // left to the operating system (see the header)
        thread->async([&cuda, p] { cuda.host_free(p); }).get();
      });
}

}  // namespace mmfeed::device
