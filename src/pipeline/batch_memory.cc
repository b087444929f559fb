#include "pipeline/batch_memory.h"

#include <cstdlib>

#include "core/thread_pool.h"
#include "device/cuda_runtime.h"
#include "mmfeed/json.h"

namespace mmfeed::pipeline {

namespace {

std::shared_ptr<core::Allocator> allocator_for(const LoaderConfig& config, int device) {
  if (!config.pin_memory || !device::CudaRuntime::get().available()) return core::heap_allocator();
  return device::host_allocator(device, std::make_shared<core::ThreadPool>("cuda-pin", 1));
}

}  // namespace

BatchMemory::BatchMemory(const LoaderConfig& config)
    : pin_memory_(config.pin_memory),
      pin_device_(device::choose_pin_device(config.pin_device, std::getenv("LOCAL_RANK"),
                                            device::CudaRuntime::get().device_count())),
      allocator_(allocator_for(config, pin_device_)),
      pool_(core::BufferPoolOptions{.alignment = 64,
                                    .max_cached_bytes = config.max_buffered_bytes / 2,
                                    .allocator = allocator_,
                                    .uniform = true}) {}

std::string BatchMemory::describe() const {
  if (!pin_memory_) return "pageable (pin_memory off)";
  std::string text = device::CudaRuntime::get().describe();
  if (const auto* pinned = dynamic_cast<const device::PinnedAllocator*>(allocator_.get())) {
    text += " on device " + std::to_string(pin_device_);
    if (const std::size_t refused = pinned->pageable_blocks(); refused > 0) {
      text += " (" + std::to_string(refused) + " buffers pageable: cudaHostAlloc refused them)";
    }
  }
  return text;
}

std::string BatchMemory::to_json() const {
  std::string json = "\"batch_memory\":";
  append_json_string(json, describe());
  const core::BufferPoolStats p = pool_.stats();
  json += ",\"batch_buffers\":{\"acquires\":" + std::to_string(p.acquires) + ",\"reuses\":" + std::to_string(p.reuses) +
          ",\"allocations\":" + std::to_string(p.allocations) +
          ",\"peak_bytes_in_use\":" + std::to_string(p.peak_bytes_in_use) +
          ",\"bytes_cached\":" + std::to_string(p.bytes_cached) + "}";
  return json;
}

}  // namespace mmfeed::pipeline
