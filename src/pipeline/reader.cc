// The concurrent driver's read stage (its "read" thread): this rank's positions in order, each a
// Work admitted by the memory budget, its fetches submitted.
#include "pipeline/concurrent_driver.h"

#include "core/thread_pool.h"

namespace mmfeed::pipeline {

namespace {

constexpr std::uint64_t kTextAhead = 64;  // samples whose remote text is asked for ahead of the reader, at most
constexpr std::uint64_t kTextBatch = 32;  // asked for together (their adjacent ranges one GET)

// The positions the reader will reach next, walked ahead of it (the same walk, a step count
// apart), their samples' remote text asked for in batches.
class TextAhead {
 public:
  TextAhead(const Stages& s, const OrderOptions& order)
      : processor_(s.processor), walk_(s.population, order, s.start, nullptr) {}

  // The reader is at its `reached`-th sample: keep the text of the next ones asked for.
  void reach(std::uint64_t reached) {
    if (done_ || asked_ >= reached + kTextAhead - kTextBatch) return;
    std::vector<std::uint64_t> batch;
    while (batch.size() < kTextBatch) {
      const std::optional<Walk::Step> step = walk_.next();
      if (!step) {
        done_ = true;
        break;
      }
      if (!step->end) batch.push_back(step->index);
    }
    asked_ += batch.size();
    processor_.prefetch_text(batch);
  }

 private:
  const SampleProcessor& processor_;
  Walk walk_;
  std::uint64_t asked_ = 0;
  bool done_ = false;
};

}  // namespace

void ConcurrentDriver::run_reader() {
  core::set_current_thread_name("read");
  Walk walk(s_.population, options_.order, s_.start, &s_.metrics);
  std::optional<TextAhead> ahead;  // only where a sample's text costs a round trip
  if (s_.processor.reads_text_remotely()) ahead.emplace(s_, options_.order);
  std::uint64_t reached = 0;
  std::uint64_t tag = 0;
  int announced = -1;
  for (auto step = walk.next(); step && !stop_.load(); step = walk.next()) {
    if (step->epoch != announced) {  // the batcher learns where the epoch ends
      {
        std::lock_guard lock(ready_mu_);
        epoch_sizes_[step->epoch] = step->epoch_size;
      }
      ready_cv_.notify_all();
      announced = step->epoch;
    }
    if (step->end) continue;
    if (!memory_.admit()) return;
    if (ahead) ahead->reach(reached++);
    auto w = s_.processor.prepare(step->epoch, step->seq, step->index);
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
  {
    std::lock_guard lock(ready_mu_);
    reader_done_ = true;
  }
  ready_cv_.notify_all();
  s_.fetcher.close();
}

}  // namespace mmfeed::pipeline
