#include "pipeline/progress.h"

#include <utility>

#include "pipeline/sample.h"

namespace mmfeed::pipeline {

void Progress::formed(int epoch, std::uint64_t index, BatchEnd after) {
  std::lock_guard lock(mu_);
  formed_[order_key(epoch, index)] = std::move(after);
}

void Progress::delivered(const Batch& batch) {
  std::lock_guard lock(mu_);
  const auto it = formed_.find(order_key(batch.epoch, batch.index));
  if (batch.epoch != delivered_.epoch) {  // a resharded epoch is over: plain order again
    delivered_.old_world_size = 0;
    delivered_.old_positions.clear();
    delivered_.old_windows.clear();
    delivered_.old_cost_switches.clear();
  }
  delivered_.epoch = batch.epoch;
  delivered_.position = it->second.position;
  delivered_.packed_delivered = it->second.packed_delivered;
  delivered_.window_delivered = std::move(it->second.window_delivered);
  formed_.erase(it);
}

LoaderState Progress::state() const {
  std::lock_guard lock(mu_);
  return delivered_;
}

}  // namespace mmfeed::pipeline
