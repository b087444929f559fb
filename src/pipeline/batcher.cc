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
  Gathering gathering(s_.builder, s_.start);
  // The gathered group into batches; false: stop.
  auto emit = [&]() -> bool {
    if (!gathering.empty()) {
      // Room in the prefetch queue first, then the batch: a batch built ahead of room would hold
      // a buffer more while it waits, and the trainer would not get it sooner.
      if (!out_.wait_for_room()) return false;
      // A trainer lets go of its previous batch just after it takes the next (`for batch in
      // loader` rebinds the name once next() returns): a batch begun before that makes three
      // buffers live where two serve, a batch of memory more at the peak. So the batcher waits,
      // briefly, until no more are live than the queued ones and the trainer's; one that keeps
      // its batches (the wait ran out) is not waited for again.
      if (!trainer_keeps_batches_ && !s_.builder.wait_for_live_batches(out_.size() + 1, kReleaseWait)) {
        trainer_keeps_batches_ = true;
      }
    }
    auto built = gathering.build(cpu_.get(), stop_, [&](Batch batch) {
      const auto bytes = static_cast<std::int64_t>(batch.buffer_capacity());
      // Over the byte budget, wait until the trainer has taken what is queued.
      if (!memory_.wait_for_batch(bytes, [&] { return out_.size() == 0; })) return false;
      if (!out_.push(std::move(batch))) return false;
      if (s_.trace != nullptr) s_.trace->counter("prefetched batches", static_cast<double>(out_.size()));
      prefetched_gauge_.set(static_cast<std::int64_t>(out_.size()));
      return true;
    });
    if (!built.ok()) {
      fail(std::move(built).error());
      return false;
    }
    return *built;
  };
  // Ordered: the next sample of the order. Unordered: any finished sample of the epoch.
  auto next_ready = [&] {
    const int epoch = gathering.epoch();
    if (options_.ordered) return ready_.find(order_key(epoch, gathering.position()));
    auto it = ready_.lower_bound(order_key(epoch, 0));
    return it != ready_.end() && it->first < order_key(epoch + 1, 0) ? it : ready_.end();
  };
  const auto epoch_over = [&] {
    auto size = epoch_sizes_.find(gathering.epoch());
    return size != epoch_sizes_.end() && gathering.position() >= size->second;
  };
  while (!stop_.load()) {
    std::unique_ptr<Work> w;
    {
      std::unique_lock lock(ready_mu_);
      ready_cv_.wait(lock, [&] {
        return stop_.load() || next_ready() != ready_.end() || epoch_over() ||
               (reader_done_ && !epoch_sizes_.count(gathering.epoch()));
      });
      if (stop_.load()) break;
      if (auto it = next_ready(); it != ready_.end()) {
        w = std::move(it->second);
        ready_.erase(it);
      } else if (epoch_over()) {
        lock.unlock();
        if (!emit()) break;  // the epoch's last, partial batch
        gathering.next_epoch();
        if (gathering.epoch() >= options_.order.epochs) {
          if (Status st = end_of_run(); !st.ok()) fail(std::move(st).error());
          break;
        }
        continue;
      } else {
        break;  // reader finished without this epoch
      }
    }
    memory_.leave(*w);
    if (Status st = account(*w); !st.ok()) {
      fail(std::move(st).error());
      return;
    }
    if (gathering.take(std::move(w)) && !emit()) break;
  }
  out_.close();
}

}  // namespace mmfeed::pipeline
