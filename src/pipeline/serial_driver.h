// The serial driver (mode "serial"): every stage on the caller's thread, one sample after another
// — the baseline the concurrent driver is measured against, and the simplest reading of what
// the stages do. It walks the run as the concurrent driver's stages do (walk.h): each next()
// takes positions, fetching and processing each sample in turn, until a group is gathered, builds
// its batches and returns the first; the rest of the group's packed rows wait in `ready_`.
//
// Thread safety: next() on the trainer's thread only; stop() from any thread.
#pragma once

#include <deque>

#include "pipeline/driver.h"
#include "pipeline/text_ahead.h"

namespace mmfeed::pipeline {

class SerialDriver final : public Driver {
 public:
  explicit SerialDriver(Stages stages)
      : Driver(std::move(stages)),
        walk_(s_.population, options_.order, s_.start, &s_.metrics),
        gathering_(s_.builder, s_.start) {
    if (s_.processor.reads_text_remotely()) ahead_.emplace(s_, options_.order);
  }

  Result<std::optional<Batch>> next(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) override;
  void stop() override { stop_.store(true); }

 private:
  // The work of one next(): positions walked, each sample fetched, processed and gathered, until
  // a group makes batches; the first returned.
  Result<std::optional<Batch>> gather();
  // The sample at `step`, fetched and processed on this thread; nullptr once the fetcher stopped.
  std::unique_ptr<Work> load(const Walk::Step& step);
  // The gathered group into ready_.
  Status build();

  std::atomic<bool> stop_{false};
  // The trainer's thread's alone.
  Walk walk_;
  std::optional<TextAhead> ahead_;  // only where a sample's text costs a round trip
  std::uint64_t reached_ = 0;
  Gathering gathering_;
  std::deque<Batch> ready_;       // a group's batches not yet delivered
  bool final_checked_ = false;    // the end-of-run check is done
  std::optional<Error> failure_;  // the error that ended the run, returned by every later next()
};

}  // namespace mmfeed::pipeline
