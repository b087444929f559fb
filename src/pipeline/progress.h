// The run's progress as the trainer sees it: the resume state after the last batch delivered.
// Each batch's state-after is registered when the batch is formed (where the run picks up once
// that batch is taken: after its group, or, for a packed row inside a window, the window's start
// with the rows already delivered) and becomes the state when the batch is delivered.
//
// Thread safety: formed() is called by the batch-forming thread, delivered() by the trainer,
// state() by anyone; one mutex guards all.
//
// Example:
//   Progress progress(start);
//   progress.formed(0, 7, BatchEnd{.position = 64});   // batcher
//   progress.delivered(batch);                         // trainer, batch 7 of epoch 0
//   LoaderState s = progress.state();                  // position 64
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "mmfeed/loader.h"

namespace mmfeed::pipeline {

// Where a run picks up after a batch: the next position of the epoch's order; inside a packing
// window, the rows of it already delivered and the positions they held.
struct BatchEnd {
  std::uint64_t position = 0;
  std::uint64_t packed_delivered = 0;
  std::vector<std::uint64_t> window_delivered;
};

class Progress {
 public:
  explicit Progress(LoaderState start) : delivered_(std::move(start)) {}

  // Batch `index` of `epoch` was formed; `after` is the state once it is delivered.
  void formed(int epoch, std::uint64_t index, BatchEnd after);
  // `batch` (formed before) was handed to the trainer.
  void delivered(const Batch& batch);
  LoaderState state() const;

 private:
  mutable std::mutex mu_;
  LoaderState delivered_;                     // guarded by mu_
  std::map<std::uint64_t, BatchEnd> formed_;  // order_key(epoch, index) -> state after; guarded by mu_
};

}  // namespace mmfeed::pipeline
