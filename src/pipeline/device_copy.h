// The copy stage: host batches in, batches on a CUDA device out, `depth` ahead of the trainer.
// Its own thread (named "h2d") takes each batch from the loader as the engine finishes it,
// copies the batch's one buffer in one call on its own non-blocking stream (asynchronously from
// page-locked memory; synchronously, on that thread, from pageable memory), waits for that copy
// on its own thread, gives the host buffer back and queues the device batch. The trainer never
// waits on a copy, never holds the GIL while one runs (the binding releases it), and takes the
// device batch with its stream: memory the trainer lets go of is reused only after the work
// queued on that stream by then (an event recorded at release, waited for on the copy stream:
// what torch's record_stream does for its own allocator).
//
// Device buffers come from a BufferPool over cudaMalloc with uniform blocks (the size class of the
// largest batch so far), so that any free block takes any batch, whatever the sizes: once the
// largest batch has been seen and as many blocks exist as are ever in use at once (the trainer's,
// the queue's, the one being copied), the stage makes no allocating or synchronising runtime
// call (cudaMalloc, cudaFree, cudaHostAlloc, cudaFreeHost, cudaMemcpy); tests/device counts them
// with the test runtime.
//
// With the loader's trace on (trace_path), each copy is a span on the "h2d" track and each wait
// of the trainer one on its own track, beside the loader's spans. metrics()' "device_copy" has
// the trainer's waits; the loader's own consumer_wait is then the copy thread's.
//
// Thread safety: next_for(), state() and close() are the trainer's (one thread at a time);
// device batches may be dropped on any thread.
//
// Example:
//   auto copy = DeviceCopy::start(*loader, /*device=*/0, /*depth=*/2, max_cached_bytes);  // or on_device()
//   while (auto b = (*copy)->next_for(100ms, &timed_out, torch_stream)) { ... b->device == 0 ... }
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/bounded_queue.h"
#include "core/metrics.h"
#include "core/trace.h"
#include "mmfeed/loader.h"

namespace mmfeed::pipeline {

// The trace `loader` writes at close (trace_path), or null (defined in loader.cc, beside the
// loader's implementation).
core::TraceWriter* trace_of(Loader& loader);

// A loader whose batches are `host`'s on `device`: the copy stage below, `depth` batches ahead.
// What Loader::open returns for cuda_device >= 0; on an error `host` is closed.
Result<std::unique_ptr<Loader>> on_device(std::unique_ptr<Loader> host, int device, std::size_t depth,
                                          std::size_t max_cached_bytes);

class DeviceCopy {
 public:
  // Starts copying `loader`'s batches to `device` (which the CUDA runtime must know). kUnsupported
  // without a runtime able to copy; kInvalidArgument for a device it does not have. `loader` must
  // outlive the stage.
  static Result<std::unique_ptr<DeviceCopy>> start(Loader& loader, int device, std::size_t depth,
                                                   std::size_t max_cached_bytes);
  ~DeviceCopy();  // close()
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;

  // The next device batch, its copy complete; nullopt at the end; the loader's error (again on
  // every later call), or the copy's. `consumer_stream` (a cudaStream_t; null: the legacy
  // default stream) is the stream that will read it. Gives up after `timeout` with *timed_out set.
  Result<std::optional<Batch>> next_for(std::chrono::milliseconds timeout, bool* timed_out, void* consumer_stream);
  // The loader's position after the last batch handed over (batches staged ahead not counted).
  LoaderState state() const;
  // Stops the thread; a copy in flight completes first. The loader must have been closed (or
  // have ended) for this not to wait on its next batch. Idempotent.
  void close();
  // For metrics(): `"device_copy":{...}` (device, copies, bytes, device buffer pool figures).
  std::string to_json() const;

  struct Shared;  // what device batches keep alive after the stage (device_copy.cc)
  struct Block;   // what one device batch holds (device_copy.cc)

 private:
  struct Item {
    Result<std::optional<Batch>> batch = Error(ErrorCode::kInternal, "unset");
    LoaderState after;
    std::shared_ptr<Block> block;  // the batch's, told the reader's stream when handed over
  };

  DeviceCopy(Loader& loader, int device, std::size_t depth, std::shared_ptr<Shared> shared);
  void run();
  // One host batch to the device (on the copy thread); *block becomes the batch's block.
  Result<Batch> copy(const Batch& host, std::shared_ptr<Block>* block);

  Loader& loader_;
  const int device_;
  std::shared_ptr<Shared> shared_;
  core::BoundedQueue<Item> out_;
  std::atomic<bool> stop_{false};
  void* stream_ = nullptr;        // the copy thread's
  void* copied_ = nullptr;        // event: the copy thread's last copy is done
  std::optional<Error> failure_;  // the trainer's: returned again
  LoaderState delivered_;         // the trainer's
  std::atomic<std::uint64_t> copies_{0}, bytes_{0}, pageable_copies_{0};
  core::TraceWriter* const trace_;
  core::Histogram wait_ns_;     // the trainer's waits in next_for, per batch
  std::int64_t waited_ns_ = 0;  // the trainer's: timed-out waits not yet recorded
  std::thread thread_;
};

}  // namespace mmfeed::pipeline
