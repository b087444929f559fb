// The run's walk over the data, written once for both drivers: the rank's epochs and positions
// from where the run starts (Walk: the read stage's half, and the serial driver's), and the
// finished samples taken back position by position and gathered into the groups that become
// batches (Gathering: the batch stage's half, and the serial driver's).
//
// A group is positions, not good samples: a batch is the good samples of its positions, so the
// batches of any part of an epoch are the whole run's, whatever failed before it.
//
// With balancing (balance.h) the walk publishes, per balanced step, the largest rank's planned
// cost over the mean ("balance.planned_max_over_mean_ppm", the steps' mean in millionths) beside
// the drawn split's ("balance.drawn_max_over_mean_ppm"), the steps ("balance.steps") and a hash
// of the plan, every rank's samples of those steps ("balance.plan_hash": the same on every rank).
//
// Thread safety: none; each is its stage's own.
//
// Example:
//   Walk walk(population, order_options, start);
//   Gathering gathering(builder, start);
//   while (auto step = walk.next()) {
//     if (step->end) { gathering.build(nullptr, stop, sink); gathering.next_epoch(); continue; }
//     std::unique_ptr<Work> w = processor.prepare(step->epoch, step->seq, step->index);
//     ... fetch, process, account ...
//     if (gathering.take(std::move(w))) gathering.build(nullptr, stop, sink);
//   }
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/metrics.h"
#include "core/thread_pool.h"
#include "mmfeed/error.h"
#include "mmfeed/loader.h"
#include "pipeline/batch_builder.h"
#include "pipeline/order.h"
#include "pipeline/sample.h"

namespace mmfeed::pipeline {

class Walk {
 public:
  // `population` (and `metrics`, where the balanced steps are published: null for none) must
  // outlive the walk.
  Walk(const Population& population, const OrderOptions& options, LoaderState start,
       core::MetricsRegistry* metrics = nullptr);

  struct Step {
    int epoch = 0;
    std::uint64_t epoch_size = 0;  // the rank's positions in the epoch
    bool end = false;              // the epoch's positions are all given (no sample in this step)
    std::uint64_t seq = 0;         // the position in the rank's order of the epoch
    std::uint64_t index = 0;       // the sample there: its index in the population
  };
  // The next position of the run, or the end of its epoch; nullopt once every epoch has ended.
  std::optional<Step> next();

  // The steps balanced so far (EpochOrder::Stats), the current epoch's included.
  EpochOrder::Stats balance() const;

 private:
  void publish();  // balance() into the metrics, when a step was balanced since

  const Population& population_;
  const OrderOptions options_;
  const LoaderState start_;
  int epoch_;
  std::uint64_t seq_ = 0;
  std::optional<EpochOrder> order_;  // epoch_'s, once begun
  EpochOrder::Stats balance_;        // the ended epochs'
  core::MetricsRegistry* metrics_;
  std::uint64_t published_ = 0;  // balance().steps when last published
};

class Gathering {
 public:
  // `builder` must outlive the gathering. Starts at `start`'s position (the first group of a
  // resume inside a packed window skips the rows it delivered).
  Gathering(BatchBuilder& builder, const LoaderState& start);

  int epoch() const { return epoch_; }
  std::uint64_t position() const { return position_; }  // the next position to take
  bool empty() const { return samples_.empty(); }       // no good sample gathered

  // The sample of the next position, accounted, good or failed (only good ones are kept): true
  // when it completes its group.
  bool take(std::unique_ptr<Work> w);
  // The gathered group, [its first position, position()), into batches handed to `sink`
  // (BatchBuilder::build: false when the sink or `stop` ended it; an error ends the run). A group
  // without good samples makes none.
  Result<bool> build(core::ThreadPool* cpu, const std::atomic<bool>& stop, const BatchBuilder::Sink& sink);
  // The epoch's positions are all taken and its last group built: the next epoch begins.
  void next_epoch();

 private:
  BatchBuilder& builder_;
  int epoch_;
  std::uint64_t position_;
  std::uint64_t group_start_;
  std::uint64_t skip_rows_;  // the first group's rows a resume delivered already
  std::uint64_t batch_ = 0;  // the next batch number of the epoch
  std::vector<std::unique_ptr<Work>> samples_;
};

}  // namespace mmfeed::pipeline
