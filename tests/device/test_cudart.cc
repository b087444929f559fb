// The test CUDA runtime: a shared library exporting the CUDA runtime calls mmfeed makes, backed
// by host memory, so that `make test` runs the pinned allocator, the copy stage and their
// teardown on machines without a GPU. mmfeed finds it as it finds the real runtime, through
// MMFEED_CUDART=<path of this library>.
//
// Like the real runtime it registers its teardown with atexit at its first call; unlike it, it
// aborts with a message on misuse: any call after that teardown, a free of a pointer it did not
// hand out (or already took back), a copy whose host side it did not page-lock when the call
// (cudaMemcpyAsync) is only valid for page-locked memory, a copy outside a device block. Streams
// run their work on their own thread, later than the call that queued it (each copy waits
// MMFEED_TEST_CUDART_DELAY_US, 500 by default), so a host buffer reused before its copy's event
// completed shows up as wrong device bytes.
//
// Knobs (environment, read at first use): MMFEED_TEST_CUDART_DEVICES (1), _DELAY_US (500),
// _REFUSE_HOST_ALLOC=N (every Nth cudaHostAlloc fails with cudaErrorMemoryAllocation), _REPORT=PATH
// (the call counts, as JSON, written at teardown). mmfeedTestCudartCount(name) reads a count in
// process ("cudaHostAlloc", ..., "live_pinned", "live_device").
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace {

constexpr int kSuccess = 0;
constexpr int kErrorMemoryAllocation = 2;
constexpr int kErrorInvalidValue = 1;
constexpr int kErrorInvalidDevice = 101;
constexpr int kErrorNotReady = 600;
constexpr int kHostToDevice = 1;
constexpr int kDeviceToHost = 2;

[[noreturn]] void die(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::fputs("test CUDA runtime: ", stderr);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::fflush(stderr);
  std::abort();
}

long env_long(const char* name, long fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtol(text, nullptr, 10) : fallback;
}

// One stream: its work runs in order on its own thread.
struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> work;
  std::uint64_t queued = 0, done = 0;
  bool stop = false;
  std::thread thread;

  Stream() : thread([this] { run(); }) {}
  void run() {
    std::unique_lock lock(mu);
    while (true) {
      cv.wait(lock, [&] { return stop || !work.empty(); });
      if (work.empty()) return;
      auto item = std::move(work.front());
      work.pop_front();
      lock.unlock();
      item();
      lock.lock();
      ++done;
      cv.notify_all();
    }
  }
  void push(std::function<void()> item) {
    std::lock_guard lock(mu);
    work.push_back(std::move(item));
    ++queued;
    cv.notify_all();
  }
  void drain() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done == queued; });
  }
  void finish() {
    {
      std::lock_guard lock(mu);
      stop = true;
      cv.notify_all();
    }
    thread.join();
  }
};

// One event: each record makes a new generation, complete when its stream reaches it.
struct Event {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t recorded = 0, completed = 0;
  void wait_for(std::uint64_t generation) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return completed >= generation; });
  }
  std::uint64_t latest() {
    std::lock_guard lock(mu);
    return recorded;
  }
};

struct Runtime {
  std::mutex mu;
  bool started = false, torn_down = false;
  int devices = 1;
  long delay_us = 500;
  long refuse_every = 0;
  std::string report;
  std::map<std::uintptr_t, std::size_t> pinned, device;  // base -> bytes
  std::map<std::string, long> counts;
  std::map<Stream*, bool> streams;
  std::map<Event*, bool> events;
};

Runtime& rt() {
  static Runtime* runtime = new Runtime;  // never destroyed: the teardown below is what ends it
  return *runtime;
}

thread_local int current_device = 0;
thread_local int last_error = kSuccess;

void teardown() {
  Runtime& r = rt();
  std::map<Stream*, bool> streams;
  {
    std::lock_guard lock(r.mu);
    r.torn_down = true;
    streams.swap(r.streams);
    r.counts["live_pinned"] = static_cast<long>(r.pinned.size());
    r.counts["live_device"] = static_cast<long>(r.device.size());
  }
  for (auto& [stream, unused] : streams) stream->finish();
  if (!r.report.empty()) {
    if (FILE* out = std::fopen(r.report.c_str(), "w")) {
      std::fputc('{', out);
      bool first = true;
      for (const auto& [name, count] : r.counts) {
        std::fprintf(out, "%s\"%s\":%ld", first ? "" : ",", name.c_str(), count);
        first = false;
      }
      std::fputs("}\n", out);
      std::fclose(out);
    }
  }
}

// Every call starts here: counts it, starts the runtime at the first, refuses any after teardown.
Runtime& enter(const char* call) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (r.torn_down) die("%s called after the runtime's teardown (atexit)", call);
  if (!r.started) {
    r.started = true;
    r.devices = static_cast<int>(env_long("MMFEED_TEST_CUDART_DEVICES", 1));
    r.delay_us = env_long("MMFEED_TEST_CUDART_DELAY_US", 500);
    r.refuse_every = env_long("MMFEED_TEST_CUDART_REFUSE_HOST_ALLOC", 0);
    if (const char* report = std::getenv("MMFEED_TEST_CUDART_REPORT")) r.report = report;
    std::atexit(teardown);
  }
  ++r.counts[call];
  return r;
}

int fail(int error) {
  last_error = error;
  return error;
}

// The block of `blocks` holding [p, p + bytes), or false.
bool inside(const std::map<std::uintptr_t, std::size_t>& blocks, const void* p, std::size_t bytes) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  auto it = blocks.upper_bound(address);
  if (it == blocks.begin()) return false;
  --it;
  return address + bytes <= it->first + it->second;
}

Stream* stream_of(Runtime& r, void* handle, const char* call) {
  if (handle == nullptr) return nullptr;  // the legacy default stream: work runs in the call
  auto* stream = static_cast<Stream*>(handle);
  std::lock_guard lock(r.mu);
  if (!r.streams.count(stream)) die("%s on a stream it did not create (%p)", call, handle);
  return stream;
}

Event* event_of(Runtime& r, void* handle, const char* call) {
  auto* event = static_cast<Event*>(handle);
  std::lock_guard lock(r.mu);
  if (!r.events.count(event)) die("%s on an event it did not create (%p)", call, handle);
  return event;
}

void run_on(Stream* stream, std::function<void()> work) {
  if (stream == nullptr) {
    work();
  } else {
    stream->push(std::move(work));
  }
}

}  // namespace

extern "C" {

struct cudaPointerAttributes {
  int type;  // 0 unregistered, 1 host (page-locked), 2 device
  int device;
  void* devicePointer;
  void* hostPointer;
};

long mmfeedTestCudartCount(const char* name) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (std::strcmp(name, "live_pinned") == 0) return static_cast<long>(r.pinned.size());
  if (std::strcmp(name, "live_device") == 0) return static_cast<long>(r.device.size());
  const auto it = r.counts.find(name);
  return it == r.counts.end() ? 0 : it->second;
}

int cudaGetDeviceCount(int* count) {
  *count = enter("cudaGetDeviceCount").devices;
  return kSuccess;
}

int cudaRuntimeGetVersion(int* version) {
  enter("cudaRuntimeGetVersion");
  *version = 13000;
  return kSuccess;
}

int cudaSetDevice(int device) {
  Runtime& r = enter("cudaSetDevice");
  if (device < 0 || device >= r.devices) return fail(kErrorInvalidDevice);
  current_device = device;
  return kSuccess;
}

int cudaGetDevice(int* device) {
  enter("cudaGetDevice");
  *device = current_device;
  return kSuccess;
}

int cudaGetLastError() {
  enter("cudaGetLastError");
  const int error = last_error;
  last_error = kSuccess;
  return error;
}

const char* cudaGetErrorString(int error) {
  enter("cudaGetErrorString");
  switch (error) {
    case kSuccess: return "no error";
    case kErrorMemoryAllocation: return "out of memory";
    case kErrorInvalidDevice: return "invalid device ordinal";
    case kErrorNotReady: return "device not ready";
    default: return "invalid argument";
  }
}

int cudaHostAlloc(void** p, std::size_t bytes, unsigned int /*flags*/) {
  Runtime& r = enter("cudaHostAlloc");
  {
    std::lock_guard lock(r.mu);
    if (r.refuse_every > 0 && r.counts["cudaHostAlloc"] % r.refuse_every == 0) return fail(kErrorMemoryAllocation);
  }
  void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) return fail(kErrorMemoryAllocation);
  std::lock_guard lock(r.mu);
  r.pinned[reinterpret_cast<std::uintptr_t>(block)] = bytes;
  *p = block;
  return kSuccess;
}

int cudaFreeHost(void* p) {
  Runtime& r = enter("cudaFreeHost");
  std::size_t bytes = 0;
  {
    std::lock_guard lock(r.mu);
    const auto it = r.pinned.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == r.pinned.end()) die("cudaFreeHost(%p): not a block cudaHostAlloc gave, or freed already", p);
    bytes = it->second;
    r.pinned.erase(it);
  }
  munmap(p, bytes);
  return kSuccess;
}

int cudaMalloc(void** p, std::size_t bytes) {
  Runtime& r = enter("cudaMalloc");
  void* block = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (block == nullptr) return fail(kErrorMemoryAllocation);
  std::lock_guard lock(r.mu);
  r.device[reinterpret_cast<std::uintptr_t>(block)] = bytes;
  *p = block;
  return kSuccess;
}

int cudaFree(void* p) {
  Runtime& r = enter("cudaFree");
  std::map<Stream*, bool> streams;
  {
    std::lock_guard lock(r.mu);
    streams = r.streams;
  }
  for (auto& [stream, unused] : streams) stream->drain();  // as the real one, it waits for the device
  if (p == nullptr) return kSuccess;
  std::lock_guard lock(r.mu);
  if (r.device.erase(reinterpret_cast<std::uintptr_t>(p)) == 0)
    die("cudaFree(%p): not a block cudaMalloc gave, or freed already", p);
  std::free(p);
  return kSuccess;
}

int cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* p) {
  Runtime& r = enter("cudaPointerGetAttributes");
  std::lock_guard lock(r.mu);
  std::memset(attributes, 0, sizeof *attributes);
  if (inside(r.pinned, p, 1)) {
    attributes->type = 1;
    attributes->hostPointer = const_cast<void*>(p);
  } else if (inside(r.device, p, 1)) {
    attributes->type = 2;
    attributes->devicePointer = const_cast<void*>(p);
  }
  return kSuccess;
}

int cudaStreamCreateWithFlags(void** stream, unsigned int /*flags*/) {
  Runtime& r = enter("cudaStreamCreateWithFlags");
  auto* created = new Stream;
  std::lock_guard lock(r.mu);
  r.streams[created] = true;
  *stream = created;
  return kSuccess;
}

int cudaStreamDestroy(void* handle) {
  Runtime& r = enter("cudaStreamDestroy");
  Stream* stream = stream_of(r, handle, "cudaStreamDestroy");
  {
    std::lock_guard lock(r.mu);
    r.streams.erase(stream);
  }
  stream->finish();  // its queued work completes first, as the real runtime's does
  delete stream;
  return kSuccess;
}

int cudaStreamSynchronize(void* handle) {
  Runtime& r = enter("cudaStreamSynchronize");
  if (Stream* stream = stream_of(r, handle, "cudaStreamSynchronize")) stream->drain();
  return kSuccess;
}

int cudaEventCreateWithFlags(void** event, unsigned int /*flags*/) {
  Runtime& r = enter("cudaEventCreateWithFlags");
  auto* created = new Event;
  std::lock_guard lock(r.mu);
  r.events[created] = true;
  *event = created;
  return kSuccess;
}

int cudaEventDestroy(void* handle) {
  Runtime& r = enter("cudaEventDestroy");
  Event* event = event_of(r, handle, "cudaEventDestroy");
  event->wait_for(event->latest());  // the real runtime defers the release; the stream may still signal it
  std::lock_guard lock(r.mu);
  r.events.erase(event);
  delete event;
  return kSuccess;
}

int cudaEventRecord(void* event_handle, void* stream_handle) {
  Runtime& r = enter("cudaEventRecord");
  Event* event = event_of(r, event_handle, "cudaEventRecord");
  Stream* stream = stream_of(r, stream_handle, "cudaEventRecord");
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(event->mu);
    generation = ++event->recorded;
  }
  run_on(stream, [event, generation] {
    std::lock_guard lock(event->mu);
    if (event->completed < generation) event->completed = generation;
    event->cv.notify_all();
  });
  return kSuccess;
}

int cudaEventQuery(void* handle) {
  Runtime& r = enter("cudaEventQuery");
  Event* event = event_of(r, handle, "cudaEventQuery");
  std::lock_guard lock(event->mu);
  return event->completed >= event->recorded ? kSuccess : kErrorNotReady;
}

int cudaEventSynchronize(void* handle) {
  Runtime& r = enter("cudaEventSynchronize");
  Event* event = event_of(r, handle, "cudaEventSynchronize");
  event->wait_for(event->latest());
  return kSuccess;
}

int cudaStreamWaitEvent(void* stream_handle, void* event_handle, unsigned int /*flags*/) {
  Runtime& r = enter("cudaStreamWaitEvent");
  Stream* stream = stream_of(r, stream_handle, "cudaStreamWaitEvent");
  Event* event = event_of(r, event_handle, "cudaStreamWaitEvent");
  const std::uint64_t generation = event->latest();
  run_on(stream, [event, generation] { event->wait_for(generation); });
  return kSuccess;
}

int cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, int kind, void* stream_handle) {
  Runtime& r = enter("cudaMemcpyAsync");
  Stream* stream = stream_of(r, stream_handle, "cudaMemcpyAsync");
  {
    std::lock_guard lock(r.mu);
    if (kind == kHostToDevice) {
      if (!inside(r.pinned, src, bytes))
        die("cudaMemcpyAsync from host memory it did not page-lock (%p, %zu bytes)", src, bytes);
      if (!inside(r.device, dst, bytes))
        die("cudaMemcpyAsync to %p (%zu bytes): not inside a cudaMalloc block", dst, bytes);
    } else if (kind == kDeviceToHost) {
      if (!inside(r.pinned, dst, bytes))
        die("cudaMemcpyAsync to host memory it did not page-lock (%p, %zu bytes)", dst, bytes);
      if (!inside(r.device, src, bytes))
        die("cudaMemcpyAsync from %p (%zu bytes): not inside a cudaMalloc block", src, bytes);
    } else {
      return fail(kErrorInvalidValue);
    }
  }
  const long delay = r.delay_us;
  run_on(stream, [dst, src, bytes, delay] {
    if (delay > 0) usleep(static_cast<useconds_t>(delay));
    std::memcpy(dst, src, bytes);
  });
  return kSuccess;
}

int cudaMemcpy(void* dst, const void* src, std::size_t bytes, int kind) {
  Runtime& r = enter("cudaMemcpy");
  std::map<Stream*, bool> streams;
  {
    std::lock_guard lock(r.mu);
    const bool to_device = kind == kHostToDevice;
    if (kind != kHostToDevice && kind != kDeviceToHost) return fail(kErrorInvalidValue);
    if (!inside(r.device, to_device ? dst : src, bytes))
      die("cudaMemcpy: %p (%zu bytes) is not inside a cudaMalloc block", to_device ? dst : src, bytes);
    streams = r.streams;
  }
  for (auto& [stream, unused] : streams) stream->drain();  // synchronous with the device
  std::memcpy(dst, src, bytes);
  return kSuccess;
}

}  // extern "C"
