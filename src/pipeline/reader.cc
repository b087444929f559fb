// The concurrent driver's read stage (its "read" thread): this rank's positions in order, each a
// Work admitted by the memory budget, its fetches submitted.
#include "pipeline/concurrent_driver.h"

#include "core/thread_pool.h"
#include "pipeline/text_ahead.h"

namespace mmfeed::pipeline {

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
