#include "pipeline/device_copy.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "core/buffer_pool.h"
#include "core/clock.h"
#include "core/thread_pool.h"
#include "device/cuda_runtime.h"
#include "mmfeed/json.h"

namespace mmfeed::pipeline {

namespace {

using device::CudaRuntime;

// cudaMalloc / cudaFree behind the BufferPool interface; allocate() runs on the copy thread, whose
// current device is the stage's. A refusal throws (the copy turns it into an error).
class DeviceAllocator final : public core::Allocator {
 public:
  explicit DeviceAllocator(const CudaRuntime& cuda) : cuda_(cuda) {}
  void* allocate(std::size_t bytes, std::size_t /*alignment: cudaMalloc's 256 bytes cover ours*/) override {
    void* p = nullptr;
    if (const int status = cuda_.device_alloc(&p, bytes); status != 0) {
      throw std::runtime_error(cuda_.error_text("cudaMalloc", status) + " asking for " + std::to_string(bytes) +
                               " bytes");
    }
    return p;
  }
  void deallocate(void* p, std::size_t /*bytes*/, std::size_t /*alignment*/) override { cuda_.device_free(p); }
  const char* name() const override { return "cuda-device"; }

 private:
  const CudaRuntime& cuda_;
};

// The bytes a batch's tensors span in its buffer.
std::size_t span_of(const Batch& batch) {
  std::size_t end = 0;
  for (const Tensor& t : batch.tensors) end = std::max(end, t.offset + t.bytes());
  return end;
}

}  // namespace

// The device buffer pool and, per device block, the event that marks the end of the trainer's use
// of it. Device batches keep it alive; it outlives the stage.
struct DeviceCopy::Shared {
  const CudaRuntime& cuda;
  const int device;
  core::BufferPool pool;
  std::mutex mu;
  std::map<const std::byte*, void*> released;  // block -> event recorded at its last release

  Shared(const CudaRuntime& runtime, int on, std::size_t max_cached_bytes)
      : cuda(runtime),
        device(on),
        pool(core::BufferPoolOptions{.alignment = 256,
                                     .max_cached_bytes = max_cached_bytes,
                                     .allocator = std::make_shared<DeviceAllocator>(runtime),
                                     .uniform = true}) {}
  ~Shared() {
    for (auto& [block, event] : released) cuda.event_destroy(event);
  }

  // The trainer let go of `block`, last read on `stream`: an event after that work, for the next
  // copy into the block to wait for. Keeps the calling thread's current device.
  void release(const std::byte* block, void* stream) {
    if (CudaRuntime::exiting()) return;
    int current = device;
    cuda.get_device(&current);
    if (current != device) cuda.set_device(device);
    std::lock_guard lock(mu);
    void*& event = released[block];
    if (event == nullptr && cuda.event_create(&event) != 0) event = nullptr;
    if (event != nullptr && cuda.event_record(event, stream) != 0) {
      cuda.event_destroy(event);
      event = nullptr;
    }
    if (current != device) cuda.set_device(current);
  }

  // Before a copy into `block` on `stream`: wait for the trainer's last use of it.
  int wait_for_release(const std::byte* block, void* stream) {
    std::lock_guard lock(mu);
    const auto it = released.find(block);
    return it == released.end() || it->second == nullptr ? 0 : cuda.stream_wait_event(stream, it->second);
  }
};

// What a device batch holds: its block of the pool and the stream its reader used.
struct DeviceCopy::Block {
  std::shared_ptr<DeviceCopy::Shared> shared;
  core::Buffer buffer;
  std::atomic<void*> stream{nullptr};  // set when the trainer takes the batch
  ~Block() { shared->release(buffer.data(), stream.load()); }
};

Result<std::unique_ptr<DeviceCopy>> DeviceCopy::start(Loader& loader, int device, std::size_t depth,
                                                      std::size_t max_cached_bytes) {
  const CudaRuntime& cuda = CudaRuntime::get();
  if (!cuda.available() || !cuda.copies_available()) {
    return Error(ErrorCode::kUnsupported,
                 "cannot copy batches to cuda:" + std::to_string(device) + ": " + cuda.describe());
  }
  if (device < 0 || device >= cuda.device_count()) {
    return Error(ErrorCode::kInvalidArgument, "device cuda:" + std::to_string(device) + " does not exist (" +
                                                  std::to_string(cuda.device_count()) + " visible)");
  }
  auto shared = std::make_shared<Shared>(cuda, device, max_cached_bytes);
  try {
    return std::unique_ptr<DeviceCopy>(
        new DeviceCopy(loader, device, std::max<std::size_t>(depth, 1), std::move(shared)));
  } catch (const std::system_error& e) {
    return Error(ErrorCode::kResourceExhausted, std::string("cannot start the copy thread: ") + e.what());
  }
}

DeviceCopy::DeviceCopy(Loader& loader, int device, std::size_t depth, std::shared_ptr<Shared> shared)
    : loader_(loader),
      device_(device),
      shared_(std::move(shared)),
      out_(depth),
      delivered_(loader.state()),
      trace_(trace_of(loader)) {
  thread_ = std::thread([this] { run(); });
}

DeviceCopy::~DeviceCopy() { close(); }

void DeviceCopy::close() {
  stop_.store(true);
  (void)out_.cancel();  // device batches staged ahead go back to the pool
  if (thread_.joinable()) thread_.join();
}

Result<Batch> DeviceCopy::copy(const Batch& host, std::shared_ptr<Block>* handle) {
  const CudaRuntime& cuda = shared_->cuda;
  const std::size_t bytes = span_of(host);
  auto block = std::make_shared<Block>();
  block->shared = shared_;
  try {
    block->buffer = shared_->pool.acquire(bytes);
  } catch (const std::exception& e) {
    return Error(ErrorCode::kResourceExhausted,
                 std::string("copy to cuda:") + std::to_string(device_) + ": " + e.what());
  }
  const bool pinned = cuda.is_pinned(host.buffer());
  core::TraceSpan span(trace_, pinned ? "copy to device" : "copy to device (pageable)", "h2d");
  int status = shared_->wait_for_release(block->buffer.data(), stream_);
  if (status == 0) status = cuda.copy_to_device(block->buffer.data(), host.buffer(), bytes, stream_, pinned);
  if (status == 0) status = cuda.event_record(copied_, stream_);
  if (status == 0) status = cuda.event_synchronize(copied_);  // this thread waits, not the trainer
  if (status != 0) {
    return Error(ErrorCode::kIoError, "copy of batch " + std::to_string(host.index) + " to cuda:" +
                                          std::to_string(device_) + ": " + cuda.error_text("copy", status));
  }
  copies_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (!pinned) pageable_copies_.fetch_add(1, std::memory_order_relaxed);
  Batch out;
  out.epoch = host.epoch;
  out.index = host.index;
  out.sample_ids = host.sample_ids;
  out.tensors = host.tensors;
  out.scalars = host.scalars;
  out.device = device_;
  std::byte* data = block->buffer.data();
  const std::size_t capacity = block->buffer.capacity();
  *handle = block;
  out.set_buffer(std::move(block), data, capacity);
  return out;
}

void DeviceCopy::run() {
  core::set_current_thread_name("h2d");
  const CudaRuntime& cuda = shared_->cuda;
  auto finish = [&](Item item) {
    out_.push(std::move(item));
    out_.close();
  };
  if (int status = cuda.set_device(device_); status != 0) {
    return finish({Error(ErrorCode::kIoError,
                         "cuda:" + std::to_string(device_) + ": " + cuda.error_text("cudaSetDevice", status)),
                   {},
                   {}});
  }
  if (int status = cuda.stream_create(&stream_); status != 0) {
    return finish({Error(ErrorCode::kResourceExhausted, cuda.error_text("cudaStreamCreateWithFlags", status)), {}, {}});
  }
  if (int status = cuda.event_create(&copied_); status != 0) {
    cuda.stream_destroy(stream_);
    return finish({Error(ErrorCode::kResourceExhausted, cuda.error_text("cudaEventCreateWithFlags", status)), {}, {}});
  }
  while (!stop_.load()) {
    bool timed_out = false;
    Result<std::optional<Batch>> host = loader_.next_for(std::chrono::milliseconds(100), &timed_out, nullptr);
    if (timed_out) continue;
    Item item;
    item.after = loader_.state();
    if (!host.ok() || !host->has_value()) {
      item.batch = std::move(host);
      finish(std::move(item));
      break;
    }
    Result<Batch> device = copy(**host, &item.block);
    if (!device.ok()) {
      item.batch = std::move(device).error();
      finish(std::move(item));
      break;
    }
    item.batch = std::optional<Batch>(std::move(device).value());
    if (!out_.push(std::move(item))) break;  // closed
  }
  cuda.event_destroy(copied_);
  cuda.stream_destroy(stream_);  // waits for nothing: every copy was waited for
}

Result<std::optional<Batch>> DeviceCopy::next_for(std::chrono::milliseconds timeout, bool* timed_out,
                                                  void* consumer_stream) {
  *timed_out = false;
  if (failure_) return *failure_;
  std::optional<Item> item;
  {
    const core::Stopwatch wait;
    core::TraceSpan span(trace_, "next (device batch)", "consumer");
    item = out_.pop_for(timeout);
    waited_ns_ += wait.elapsed_ns();
  }
  if (item) {
    wait_ns_.record(static_cast<std::uint64_t>(waited_ns_));
    waited_ns_ = 0;
  }
  if (!item) {
    if (!out_.closed()) {
      *timed_out = true;
      return std::optional<Batch>();
    }
    if (stop_.load()) return Error(ErrorCode::kCancelled, "the loader was closed");
    return std::optional<Batch>();  // the end, handed over already
  }
  if (!item->batch.ok()) {
    failure_ = item->batch.error();
    return *failure_;
  }
  delivered_ = std::move(item->after);
  // The reader's stream, for the release event; the copy itself is complete already.
  if (item->block) item->block->stream.store(consumer_stream);
  return std::move(item->batch);
}

LoaderState DeviceCopy::state() const { return delivered_; }

std::string DeviceCopy::to_json() const {
  const core::BufferPoolStats p = shared_->pool.stats();
  const core::HistogramSnapshot waits = wait_ns_.snapshot();
  return "\"device_copy\":{\"device\":" + std::to_string(device_) + ",\"copies\":" + std::to_string(copies_.load()) +
         ",\"trainer_wait_s\":" + std::to_string(static_cast<double>(waits.sum) / 1e9) +
         ",\"trainer_wait_ms_p50\":" + std::to_string(static_cast<double>(waits.percentile(0.5)) / 1e6) +
         ",\"bytes\":" + std::to_string(bytes_.load()) +
         ",\"pageable_copies\":" + std::to_string(pageable_copies_.load()) +
         ",\"device_buffers\":{\"acquires\":" + std::to_string(p.acquires) + ",\"reuses\":" + std::to_string(p.reuses) +
         ",\"allocations\":" + std::to_string(p.allocations) + ",\"frees\":" + std::to_string(p.frees) +
         ",\"bytes_cached\":" + std::to_string(p.bytes_cached) + "}}";
}

namespace {

// The host loader and its copy stage as one Loader. The copy stage is declared after the loader
// it reads, so it is destroyed first.
class DeviceLoader final : public Loader {
 public:
  DeviceLoader(std::unique_ptr<Loader> host, std::unique_ptr<DeviceCopy> copy)
      : host_(std::move(host)), copy_(std::move(copy)) {}
  ~DeviceLoader() override { static_cast<void>(close()); }

  Result<std::optional<Batch>> next() override {
    bool timed_out = true;
    Result<std::optional<Batch>> r = std::optional<Batch>();
    while (timed_out) r = copy_->next_for(std::chrono::milliseconds(100), &timed_out, nullptr);
    return r;
  }
  Result<std::optional<Batch>> next_for(std::chrono::milliseconds timeout, bool* timed_out,
                                        void* consumer_stream) override {
    return copy_->next_for(timeout, timed_out, consumer_stream);
  }
  LoaderState state() const override { return copy_->state(); }  // batches staged ahead not counted
  std::vector<SampleError> errors() const override { return host_->errors(); }
  std::string metrics_json() const override {
    std::string json = host_->metrics_json();
    if (json.size() > 2 && json.back() == '}') json.insert(json.size() - 1, "," + copy_->to_json());
    return json;
  }
  // The copy thread asks the host loader for batches: the loader closes first, so that it does
  // not wait on one.
  Status close() override {
    Status st = host_->close();
    copy_->close();
    return st;
  }

 private:
  std::unique_ptr<Loader> host_;
  std::unique_ptr<DeviceCopy> copy_;
};

}  // namespace

Result<std::unique_ptr<Loader>> on_device(std::unique_ptr<Loader> host, int device, std::size_t depth,
                                          std::size_t max_cached_bytes) {
  Result<std::unique_ptr<DeviceCopy>> copy = DeviceCopy::start(*host, device, depth, max_cached_bytes);
  if (!copy.ok()) {
    static_cast<void>(host->close());  // the copy stage's failure is the error to report
    return std::move(copy).error().with_context("LoaderConfig.cuda_device");
  }
  return std::unique_ptr<Loader>(std::make_unique<DeviceLoader>(std::move(host), std::move(copy).value()));
}

}  // namespace mmfeed::pipeline
