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
  if (stop_.load()) return std::optional<Batch>();
  if (!ready_.empty()) {
    Batch b = std::move(ready_.front());
    ready_.pop_front();
    return std::optional<Batch>(std::move(b));
  }
  std::vector<std::unique_ptr<Work>> samples;
  std::uint64_t start = seq_;
  while (true) {
    if (epoch_ >= config_.epochs) break;
    if (loaded_epoch_ != epoch_) {
      order_ = order(epoch_);
      loaded_epoch_ = epoch_;
      seq_ = 0;
      batch_ = 0;
      start = 0;
    }
    if (seq_ - start == s_.builder.group_size()) {  // a group is positions (concurrent_driver.cc)
      if (!samples.empty()) break;
      start = seq_;  // every sample of the group failed: the next group
    }
    if (seq_ >= order_.size()) {
      if (!samples.empty()) break;  // the epoch's last, partial group
      ++epoch_;
      continue;
    }
    auto w = s_.processor.prepare(epoch_, seq_, order_[seq_]);
    ++seq_;
    for (std::size_t i = 0; !w->error && i < w->fetches(); ++i) {
      if (!s_.fetcher.submit(w->fetch(i, i))) return std::optional<Batch>();
      auto r = s_.fetcher.next();
      if (!r) return std::optional<Batch>();
      if (!r->data.ok()) {
        w->error = SampleError{w->id, "fetch", r->data.error().to_string(), r->data.error().code()};
      } else {
        w->bytes[i] = std::move(r->data).value();
      }
    }
    if (!w->error) s_.processor.process(*w, /*defer_images=*/config_.token_budget > 0);
    MMFEED_RETURN_IF_ERROR(account(*w));
    if (!w->error) samples.push_back(std::move(w));
  }
  if (samples.empty()) {  // the run is over
    if (!final_checked_) {
      final_checked_ = true;
      MMFEED_RETURN_IF_ERROR(end_of_run());
    }
    return std::optional<Batch>();
  }
  const int epoch = samples.front()->epoch;
  const std::atomic<bool> never{false};
  MMFEED_RETURN_IF_ERROR(
      s_.builder.build(std::move(samples), epoch, start, seq_, 0, batch_, /*cpu=*/nullptr, never, [&](Batch b) {
        ready_.push_back(std::move(b));
        return true;
      }));
  if (ready_.empty()) return gather();  // every sample of the group failed late
  Batch b = std::move(ready_.front());
  ready_.pop_front();
  return std::optional<Batch>(std::move(b));
}

}  // namespace mmfeed::pipeline
