#include "pipeline/serial_driver.h"

namespace mmfeed::pipeline {

Result<std::optional<Batch>> SerialDriver::next(std::optional<std::chrono::milliseconds> /*timeout*/,
                                                bool* /*timed_out*/) {
  // A run that failed stays failed (as the concurrent driver's does): no later call consumes
  // more of the epoch behind the error.
  if (failure_) return *failure_;
  Result<std::optional<Batch>> r = gather();
  if (!r.ok()) failure_ = r.error();
  return r;
}

Result<std::optional<Batch>> SerialDriver::gather() {
  while (ready_.empty()) {
    if (stop_.load()) return std::optional<Batch>();
    const std::optional<Walk::Step> step = walk_.next();
    if (!step) {  // the run is over
      if (!final_checked_) {
        final_checked_ = true;
        MMFEED_RETURN_IF_ERROR(end_of_run());
      }
      return std::optional<Batch>();
    }
    if (step->end) {  // the epoch's last, partial group
      MMFEED_RETURN_IF_ERROR(build());
      gathering_.next_epoch();
      continue;
    }
    if (ahead_) ahead_->reach(reached_++);
    std::unique_ptr<Work> w = load(*step);
    if (!w) return std::optional<Batch>();
    MMFEED_RETURN_IF_ERROR(account(*w));
    if (gathering_.take(std::move(w))) MMFEED_RETURN_IF_ERROR(build());
  }
  Batch b = std::move(ready_.front());
  ready_.pop_front();
  return std::optional<Batch>(std::move(b));
}

std::unique_ptr<Work> SerialDriver::load(const Walk::Step& step) {
  std::unique_ptr<Work> w = s_.processor.prepare(step.epoch, step.seq, step.index);
  for (std::size_t i = 0; !w->error && i < w->fetches(); ++i) {
    if (!s_.fetcher.submit(w->fetch(i, i))) return nullptr;
    auto r = s_.fetcher.next();
    if (!r) return nullptr;
    w->receive(i, std::move(r->data));
  }
  if (!w->error) s_.processor.process(*w, /*defer_images=*/options_.packed);
  return w;
}

Status SerialDriver::build() {
  const std::atomic<bool> never{false};
  auto built = gathering_.build(/*cpu=*/nullptr, never, [&](Batch b) {
    ready_.push_back(std::move(b));
    return true;
  });
  if (!built.ok()) return std::move(built).error();
  return ok_status();
}

}  // namespace mmfeed::pipeline
