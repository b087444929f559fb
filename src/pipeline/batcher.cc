// The concurrent driver's batch stage (its "batch" thread): finished samples gathered in order into
// groups, accounted, built into batches and queued for the trainer.
#include "pipeline/concurrent_driver.h"

#include "core/thread_pool.h"

namespace mmfeed::pipeline {

namespace {

// How long the batcher waits for the trainer to let go of its previous batch (see emit).
constexpr std::chrono::milliseconds kReleaseWait{200};

}  // namespace

void ConcurrentDriver::run_batcher() {
  core::set_current_thread_name("batch");
  const LoaderState start = s_.start;
  int epoch = start.epoch;
  std::uint64_t seq = start.position;
  std::uint64_t index = 0;
  std::uint64_t group_start = seq;
  std::uint64_t skip_rows = start.packed_delivered;  // resuming inside a packed window
  std::vector<std::unique_ptr<Work>> samples;
  // The gathered group up to position `end` into batches; false: stop.
  auto emit = [&](std::uint64_t end) -> bool {
    if (samples.empty()) {
      group_start = end;
      return true;
    }
    // Room in the prefetch queue first, then the batch: a batch built ahead of room would hold a
    // buffer more while it waits, and the trainer would not get it sooner.
    if (!out_.wait_for_room()) return false;
    // A trainer lets go of its previous batch just after it takes the next (`for batch in loader`
    // rebinds the name once next() returns): a batch begun before that makes three buffers live
    // where two serve, a batch of memory more at the peak. So the batcher waits, briefly, until
    // no more are live than the queued ones and the trainer's; one that keeps its batches (the
    // wait ran out) is not waited for again.
    if (!trainer_keeps_batches_ && !s_.builder.wait_for_live_batches(out_.size() + 1, kReleaseWait)) {
      trainer_keeps_batches_ = true;
    }
    auto built = s_.builder.build(std::move(samples), epoch, group_start, end, skip_rows, index, cpu_.get(), stop_,
                                  [&](Batch batch) {
                                    const auto bytes = static_cast<std::int64_t>(batch.buffer_capacity());
                                    // Over the byte budget, wait until the trainer has taken what is queued.
                                    if (!memory_.wait_for_batch(bytes, [&] { return out_.size() == 0; })) return false;
                                    if (!out_.push(std::move(batch))) return false;
                                    if (s_.trace != nullptr) {
                                      s_.trace->counter("prefetched batches", static_cast<double>(out_.size()));
                                    }
                                    prefetched_gauge_.set(static_cast<std::int64_t>(out_.size()));
                                    return true;
                                  });
    if (!built.ok()) {
      fail(std::move(built).error());
      return false;
    }
    if (!*built) return false;
    samples.clear();
    skip_rows = 0;
    group_start = end;
    return true;
  };
  // Ordered: the next sample of the order. Unordered: any finished sample of the epoch.
  auto next_ready = [&] {
    if (config_.ordered) return ready_.find(order_key(epoch, seq));
    auto it = ready_.lower_bound(order_key(epoch, 0));
    return it != ready_.end() && it->first < order_key(epoch + 1, 0) ? it : ready_.end();
  };
  while (!stop_.load()) {
    std::unique_ptr<Work> w;
    {
      std::unique_lock lock(ready_mu_);
      ready_cv_.wait(lock, [&] {
        return stop_.load() || next_ready() != ready_.end() ||
               (epoch_sizes_.count(epoch) && seq >= epoch_sizes_[epoch]) ||
               (reader_done_ && !epoch_sizes_.count(epoch));
      });
      if (stop_.load()) break;
      if (auto it = next_ready(); it != ready_.end()) {
        w = std::move(it->second);
        ready_.erase(it);
      } else if (epoch_sizes_.count(epoch) && seq >= epoch_sizes_[epoch]) {
        lock.unlock();
        if (!emit(seq)) break;  // the epoch's last, partial batch
        ++epoch;
        seq = 0;
        group_start = 0;
        index = 0;
        if (epoch >= config_.epochs) {
          if (Status st = end_of_run(); !st.ok()) fail(std::move(st).error());
          break;
        }
        continue;
      } else {
        break;  // reader finished without this epoch
      }
    }
    ++seq;
    memory_.leave(*w);
    if (Status st = account(*w); !st.ok()) {
      fail(std::move(st).error());
      return;
    }
    if (!w->error) samples.push_back(std::move(w));
    // A group is positions, not good samples: a batch is the good samples of its positions, so
    // the batches of any part of an epoch are the whole run's, whatever failed before it.
    if (seq - group_start == s_.builder.group_size() && !emit(seq)) break;
  }
  out_.close();
}

}  // namespace mmfeed::pipeline
