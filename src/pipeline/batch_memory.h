// Where batch buffers come from: a pool of aligned blocks, page-locked (pinned) when asked and a
// CUDA runtime is present, so copies to the GPU are fast, else from the heap. Every block is the
// size of the largest batch so far (BufferPoolOptions::uniform), so released buffers, kept for
// reuse up to half the byte budget, serve whatever batch comes next: in steady state the trainer
// releases one batch as the batcher needs the next, so a few suffice.
//
// Thread safety: the pool is thread-safe (buffers are released from the trainer's thread).
//
// Example:
//   BatchMemory memory(config);
//   core::Buffer b = memory.pool().acquire(bytes);
//   std::string json = memory.to_json();  // "batch_memory":"...","batch_buffers":{...}
#pragma once

#include <memory>
#include <string>

#include "core/buffer_pool.h"
#include "mmfeed/loader.h"

namespace mmfeed::pipeline {

class BatchMemory {
 public:
  // Throws std::system_error when the pinning thread cannot start.
  explicit BatchMemory(const LoaderConfig& config);

  core::BufferPool& pool() { return pool_; }

  // For metrics(): `"batch_memory":"<where from>","batch_buffers":{<pool statistics>}`. Where
  // from: pinned (on which device, and how many blocks the runtime refused to page-lock), or
  // pageable and why.
  std::string to_json() const;

 private:
  std::string describe() const;

  const bool pin_memory_;
  const int pin_device_;
  const std::shared_ptr<core::Allocator> allocator_;
  core::BufferPool pool_;
};

}  // namespace mmfeed::pipeline
