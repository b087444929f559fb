#include "pipeline/concurrent_driver.h"

#include <algorithm>
#include <new>

#include "core/thread_pool.h"

namespace mmfeed::pipeline {

namespace {

// How long the batcher waits for the trainer to let go of its previous batch (see emit).
constexpr std::chrono::milliseconds kReleaseWait{200};

}  // namespace

ConcurrentDriver::ConcurrentDriver(Stages stages)
    : Driver(std::move(stages)),
      memory_(*s_.memory),
      depth_(config_.prefetch_batches, config_.batch_size),
      out_(depth_.batches()),
      buffered_gauge_(s_.metrics.gauge("loader.buffered_bytes")),
      prefetched_gauge_(s_.metrics.gauge("loader.prefetched_batches")),
      depth_gauge_(s_.metrics.gauge("loader.prefetch_depth")),
      window_gauge_(s_.metrics.gauge("loader.sample_window")) {
  depth_gauge_.set(static_cast<std::int64_t>(depth_.batches()));
  window_gauge_.set(static_cast<std::int64_t>(memory_.window()));
}

void ConcurrentDriver::start() {
  // The pool's queue holds the widest window the depth and its allowance may grow to.
  const std::size_t widest =
      sample_window(config_, depth_.automatic() ? PrefetchDepth::kMostAutomatic : depth_.batches()) +
      depth_.most_extra_samples();
  cpu_ = std::make_unique<core::ThreadPool>("process", static_cast<std::size_t>(std::max(1, config_.workers)),
                                            widest + 16);
  reader_ = std::thread([this] { guarded("read", [this] { run_reader(); }); });
  collector_ = std::thread([this] { guarded("collect", [this] { run_collector(); }); });
  batcher_ = std::thread([this] { guarded("batch", [this] { run_batcher(); }); });
}

void ConcurrentDriver::stop() {
  if (stop_.exchange(true)) return;
  s_.fetcher.cancel();
  { std::lock_guard lock(ready_mu_); }  // the batcher is either before its check or asleep
  ready_cv_.notify_all();
  memory_.stop();
  (void)out_.cancel();
  for (std::thread* t : {&reader_, &collector_, &batcher_}) {
    if (t->joinable()) t->join();
  }
  if (cpu_) cpu_->shutdown();
}

void ConcurrentDriver::fail(Error error) {
  {
    std::lock_guard lock(fail_mu_);
    failure_ = std::move(error);
  }
  out_.close();
}

void ConcurrentDriver::guarded(const char* stage, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::bad_alloc&) {
    fail(Error(ErrorCode::kResourceExhausted,
               std::string("the ") + stage + " stage ran out of memory; lower the sizes the run holds"));
  }
}

void ConcurrentDriver::finish(std::unique_ptr<Work> w) {
  memory_.processed(*w);
  {
    std::lock_guard lock(ready_mu_);
    ready_[order_key(w->epoch, w->seq)] = std::move(w);
  }
  ready_cv_.notify_all();
}

void ConcurrentDriver::run_reader() {
  core::set_current_thread_name("read");
  const LoaderState start = s_.start;
  std::uint64_t tag = 0;
  for (int epoch = start.epoch; epoch < config_.epochs && !stop_.load(); ++epoch) {
    const std::vector<std::uint64_t> ord = order(epoch);
    {
      std::lock_guard lock(ready_mu_);
      epoch_sizes_[epoch] = ord.size();
    }
    ready_cv_.notify_all();
    for (std::uint64_t seq = epoch == start.epoch ? start.position : 0; seq < ord.size(); ++seq) {
      if (!memory_.admit()) return;
      auto w = s_.processor.prepare(epoch, seq, ord[seq]);
      if (w->error || w->media.empty()) {
        submit_processing(std::move(w));
        continue;
      }
      // The requests are made before the first is submitted: once the last is, the sample may
      // complete, be processed and freed on other threads before this one reads it again.
      Work* raw = w.get();
      std::vector<storage::FetchRequest> requests;
      for (std::size_t i = 0; i < raw->fetches(); ++i) requests.push_back(raw->fetch(i, tag + i));
      {
        std::lock_guard lock(pending_mu_);
        for (std::size_t i = 0; i < requests.size(); ++i) pending_[tag++] = {raw, i};
        owned_[raw] = std::move(w);
      }
      for (storage::FetchRequest& request : requests) {
        if (!s_.fetcher.submit(std::move(request))) return;
      }
    }
  }
  {
    std::lock_guard lock(ready_mu_);
    reader_done_ = true;
  }
  ready_cv_.notify_all();
  s_.fetcher.close();
}

void ConcurrentDriver::run_collector() {
  core::set_current_thread_name("collect");
  while (auto r = s_.fetcher.next()) {
    std::unique_ptr<Work> complete;
    {
      std::lock_guard lock(pending_mu_);
      auto it = pending_.find(r->tag);
      if (it == pending_.end()) continue;
      auto [w, index] = it->second;
      pending_.erase(it);
      if (!r->data.ok()) {
        if (!w->error) {
          w->error = SampleError{w->id, "fetch", r->data.error().to_string(), r->data.error().code()};
        }
      } else {
        w->bytes[index] = std::move(r->data).value();
        memory_.hold(*w, static_cast<std::int64_t>(w->bytes[index].capacity()));
      }
      if (++w->arrived == w->fetches()) {
        complete = std::move(owned_[w]);
        owned_.erase(w);
      }
    }
    if (complete) submit_processing(std::move(complete));
  }
}

void ConcurrentDriver::submit_processing(std::unique_ptr<Work> w) {
  if (w->error) {
    finish(std::move(w));
    return;
  }
  {
    std::lock_guard lock(fetched_mu_);
    fetched_.emplace(order_key(w->epoch, w->seq), std::move(w));
  }
  cpu_->submit([this] {
    std::unique_ptr<Work> next;
    {
      std::lock_guard lock(fetched_mu_);
      if (fetched_.empty()) return;  // cannot happen: one task per sample queued
      next = std::move(fetched_.begin()->second);
      fetched_.erase(fetched_.begin());
    }
    try {
      s_.processor.process(*next, /*defer_images=*/config_.token_budget > 0);
    } catch (const std::bad_alloc&) {  // the sample's error, as any other limit it passes
      next->error =
          SampleError{next->id, "process", "out of memory while processing it", ErrorCode::kResourceExhausted};
    }
    finish(std::move(next));
  });
}

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

void ConcurrentDriver::trainer_waits() {
  // Held back: the batcher found the queue full since the trainer's previous wait. (The reader
  // finding its window full says nothing: in a loader bound by its CPUs the window is always full.)
  const std::uint64_t queue_waits = out_.stats().producer_waits;
  const bool held_back = queue_waits != seen_queue_waits_;
  seen_queue_waits_ = queue_waits;
  // Starved: the window stops the reader while the workers have nothing queued, so its samples
  // are waiting on storage.
  const bool starved = memory_.window_full() && cpu_->stats().queue.depth == 0;
  if (depth_.trainer_waited(held_back, starved)) depth_changed();
}

void ConcurrentDriver::depth_changed() {
  out_.set_capacity(depth_.batches());
  memory_.set_window(sample_window(config_, depth_));
  depth_gauge_.set(static_cast<std::int64_t>(depth_.batches()));
  window_gauge_.set(static_cast<std::int64_t>(memory_.window()));
  if (s_.trace != nullptr) s_.trace->counter("prefetch depth", static_cast<double>(depth_.batches()));
}

Result<std::optional<Batch>> ConcurrentDriver::next(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) {
  if (taken_ > 0 && !out_.closed()) {
    if (const std::size_t ready = out_.size(); ready == 0) {
      trainer_waits();
    } else if (depth_.trainer_took(ready)) {
      depth_changed();
    }
  }
  auto b = timeout ? out_.pop_for(*timeout) : out_.pop();
  if (!b && timeout && !out_.closed()) {
    *timed_out = true;
    return std::optional<Batch>();
  }
  if (b) {
    ++taken_;
    memory_.batch_taken(static_cast<std::int64_t>(b->buffer_capacity()));
    buffered_gauge_.set(memory_.held_bytes());
    prefetched_gauge_.set(static_cast<std::int64_t>(out_.size()));
    return std::optional<Batch>(std::move(*b));
  }
  std::lock_guard lock(fail_mu_);
  if (failure_) return *failure_;
  return std::optional<Batch>();
}

}  // namespace mmfeed::pipeline
