// The concurrent driver (the default mode): the stages on threads of their own, joined by maps
// and queues keyed by order_key(epoch, position).
//
//   reader      parses lines and submits their fetches, a window of samples ahead, each sample
//               admitted by the memory budget;
//   fetcher     (storage/fetcher.h) its own I/O thread and file readers;
//   collector   gathers each sample's fetched objects; a complete sample goes to the CPU pool;
//   CPU pool    `workers` threads process samples, the earliest of the order first (fetches
//               complete in any order, the next batch needs the front of the order);
//   batcher     takes processed samples in order (or, unordered, any of the epoch), accounts
//               them, builds batches into the prefetch queue under the byte budget;
//   trainer     next() takes from the prefetch queue; finding it empty, it deepens the queue and
//               the reader's window when the depth held the batcher back (pipeline/prefetch_depth.h).
//
// A sample (`Work`) is owned by one stage at a time, handed on with its unique_ptr: the reader
// keeps it in `owned_` while its objects are fetched (`pending_` maps fetch tags to it), then the
// collector moves it to `fetched_`, a worker takes it, and the worker puts it in `ready_`.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "core/bounded_queue.h"
#include "core/thread_pool.h"
#include "pipeline/driver.h"
#include "pipeline/prefetch_depth.h"

namespace mmfeed::pipeline {

class ConcurrentDriver final : public Driver {
 public:
  explicit ConcurrentDriver(Stages stages);
  ~ConcurrentDriver() override { stop(); }

  // Starts the threads; throws std::system_error when the system refuses one (those started
  // are stopped by stop()).
  void start();

  Result<std::optional<Batch>> next(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) override;
  void stop() override;

 private:
  void run_reader();
  void run_collector();
  void run_batcher();
  // A sample complete (fetched, or failed before) goes to the CPU pool (or, failed, to ready_).
  void submit_processing(std::unique_ptr<Work> w);
  // A sample processed (or failed): into ready_ for the batcher.
  void finish(std::unique_ptr<Work> w);
  // Ends the run with `error`: next() returns it once the queue is drained.
  void fail(Error error);
  // Runs a stage thread's `body`: memory the system refuses there ends the run with an error
  // naming the stage, not the process (an exception leaving a thread calls std::terminate).
  void guarded(const char* stage, const std::function<void()>& body);

  // The trainer found the queue empty: grows the prefetch depth when it held the loader back.
  void trainer_waits();
  // The depth grew or shrank: the queue's capacity, the reader's window, the gauge and the trace follow.
  void depth_changed();

  MemoryBudget& memory_;
  std::atomic<bool> stop_{false};
  PrefetchDepth depth_;      // the trainer's
  std::uint64_t taken_ = 0;  // batches the trainer took; the trainer's
  // The trainer keeps the batches it took (a wait for its previous one ran out): not waited for again.
  bool trainer_keeps_batches_ = false;  // the batcher's
  std::uint64_t seen_queue_waits_ = 0;  // the batcher's waits on a full queue at the last trainer wait
  core::BoundedQueue<Batch> out_;       // the prefetch queue
  std::unique_ptr<core::ThreadPool> cpu_;
  std::thread reader_, collector_, batcher_;
  core::Gauge& buffered_gauge_;
  core::Gauge& prefetched_gauge_;
  core::Gauge& depth_gauge_;
  core::Gauge& window_gauge_;

  std::mutex fail_mu_;
  std::optional<Error> failure_;  // guarded by fail_mu_

  std::mutex pending_mu_;                                           // reader and collector
  std::map<std::uint64_t, std::pair<Work*, std::size_t>> pending_;  // fetch tag -> (sample, image)
  std::map<Work*, std::unique_ptr<Work>> owned_;                    // samples being fetched
  std::mutex fetched_mu_;                                           // collector and workers
  std::map<std::uint64_t, std::unique_ptr<Work>> fetched_;          // fetched, waiting for a CPU worker
  std::mutex ready_mu_;                                             // workers, reader and batcher
  std::condition_variable ready_cv_;
  std::map<std::uint64_t, std::unique_ptr<Work>> ready_;  // processed, waiting for the batcher
  std::map<int, std::uint64_t> epoch_sizes_;              // set by the reader as it starts an epoch
  bool reader_done_ = false;
};

}  // namespace mmfeed::pipeline
