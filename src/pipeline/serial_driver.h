// The serial driver (mode "serial"): every stage on the caller's thread, one sample after another
// — the baseline the concurrent driver is measured against, and the simplest reading of what
// the stages do. Each next() gathers a group (fetching and processing each sample in turn), builds
// its batches and returns the first; the rest of the group's packed rows wait in `ready_`.
//
// Thread safety: next() on the trainer's thread only; stop() from any thread.
#pragma once

#include <deque>

#include "pipeline/driver.h"

namespace mmfeed::pipeline {

class SerialDriver final : public Driver {
 public:
  explicit SerialDriver(Stages stages) : Driver(std::move(stages)) {}

  Result<std::optional<Batch>> next(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) override;
  void stop() override { stop_.store(true); }

 private:
  // The work of one next(): a group gathered and built, its first batch returned.
  Result<std::optional<Batch>> gather();

  std::atomic<bool> stop_{false};
  // The trainer's thread's alone.
  int epoch_ = 0;
  int loaded_epoch_ = -1;
  std::uint64_t seq_ = 0;    // the next position of the epoch's order
  std::uint64_t batch_ = 0;  // the next batch number of the epoch
  std::vector<std::uint64_t> order_;
  std::deque<Batch> ready_;       // a packed group's rows not yet delivered
  bool final_checked_ = false;    // the end-of-run check is done
  std::optional<Error> failure_;  // the error that ended the run, returned by every later next()
};

}  // namespace mmfeed::pipeline
