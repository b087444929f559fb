// The concurrent driver's collect stage (its "collect" thread): fetched bytes made into complete
// samples, each queued for a worker of the CPU pool (earliest first).
#include "pipeline/concurrent_driver.h"

#include <new>

#include "core/thread_pool.h"

namespace mmfeed::pipeline {

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
      memory_.hold(*w, w->receive(index, std::move(r->data)));
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
      s_.processor.process(*next, /*defer_images=*/options_.packed);
    } catch (const std::bad_alloc&) {  // the sample's error, as any other limit it passes
      next->error =
          SampleError{next->id, "process", "out of memory while processing it", ErrorCode::kResourceExhausted};
    }
    finish(std::move(next));
  });
}

}  // namespace mmfeed::pipeline
