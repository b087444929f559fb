// The batch builder: a gathered group of processed samples to the batches a trainer gets. A
// padded run makes one batch of the group; a packed run plans the group (a packing window) into
// rows by token count (packer.h), has each row's images and videos decoded — on the CPU pool,
// row by row in delivery order, so the first row does not wait for the whole window — and
// assembles each row as it is ready (assembler.h). Each batch's resume state is registered with
// Progress as it is formed. An image or video that fails to decode drops its sample from its row
// and is accounted. Only planning, ordering and the text tensors (O(samples + tokens)) run on the
// building thread alone; every image's and video's pixel rows are written on the pool, straight
// into the batch buffer.
//
// Thread safety: one thread builds (the batcher, or the caller in the serial mode); the decoding
// tasks it submits run on the pool and touch only their own sample.
//
// Example:
//   BatchBuilder builder(settings.batch, processor, errors, progress, pool_buffers, metrics, &trace);
//   std::uint64_t index = 0;
//   MMFEED_ASSIGN_OR_RETURN(bool go_on, builder.build(std::move(group), epoch, 0, 64, 0, index, &cpu, stop,
//                                                     [&](Batch b) { return queue.push(std::move(b)); }));
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/buffer_pool.h"
#include "core/metrics.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "mmfeed/error.h"
#include "mmfeed/loader.h"
#include "pipeline/assembler.h"
#include "pipeline/error_budget.h"
#include "pipeline/progress.h"
#include "pipeline/sample.h"
#include "pipeline/sample_processor.h"
#include "pipeline/stage_options.h"

namespace mmfeed::pipeline {

class BatchBuilder {
 public:
  // Every reference must outlive the builder.
  BatchBuilder(const BatchOptions& options, const SampleProcessor& processor, ErrorBudget& errors, Progress& progress,
               core::BufferPool& buffers, core::MetricsRegistry& metrics, core::TraceWriter* trace);

  // Samples gathered before batches are formed: a padded batch, or a packing window.
  std::size_t group_size() const;

  // Waits until at most `batches` batch buffers are live, or `bound` has passed; true when they are.
  bool wait_for_live_batches(std::size_t batches, std::chrono::milliseconds bound) {
    return buffers_.wait_until_live_at_most(batches, bound);
  }

  // Hands a batch on; false: stop building.
  using Sink = std::function<bool(Batch)>;

  // The group of positions [start, end) of `epoch`'s order (its good samples in `samples`) into
  // batches numbered from `index` on (advanced past them), each handed to `sink` as soon as it
  // is assembled. Resuming inside a packed window, its first `skip_rows` rows are not formed
  // again. `cpu`: where packed rows' media are decoded (null: on this thread, just before each
  // row is assembled); `stop`: set when the loader closes. False when the sink or `stop` ended
  // it; an error when a late failure ends the run (on_error "fail", the error budget).
  Result<bool> build(std::vector<std::unique_ptr<Work>> samples, int epoch, std::uint64_t start, std::uint64_t end,
                     std::uint64_t skip_rows, std::uint64_t& index, core::ThreadPool* cpu,
                     const std::atomic<bool>& stop, const Sink& sink);

 private:
  // The batch of `samples`: planned and its text written on this thread, its pixels written by
  // the pool's workers while this thread waits (`cpu` null: by this thread).
  Batch assemble(const std::vector<std::unique_ptr<Work>>& samples, int epoch, std::uint64_t index, BatchEnd after,
                 core::ThreadPool* cpu);
  void write_all_pixels(std::vector<PixelJob> jobs, core::ThreadPool* cpu);
  // audio_padding with "model" made the model's own: Qwen3-Omni's processor pads to the longest clip.
  AudioPadding audio_padding() const;
  std::vector<std::vector<std::unique_ptr<Work>>> pack(std::vector<std::unique_ptr<Work>> window) const;

  const BatchOptions options_;
  const SampleProcessor& processor_;
  ErrorBudget& errors_;
  Progress& progress_;
  core::BufferPool& buffers_;
  core::TraceWriter* const trace_;
  core::Histogram& assemble_ns_;  // planning and text: the one-thread part
  core::Histogram& pixels_ns_;    // each image's rows, on whichever thread wrote them
};

}  // namespace mmfeed::pipeline
