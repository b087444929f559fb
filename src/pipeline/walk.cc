#include "pipeline/walk.h"

namespace mmfeed::pipeline {

Walk::Walk(const Population& population, const OrderOptions& options, LoaderState start)
    : population_(population), options_(options), start_(std::move(start)), epoch_(start_.epoch) {}

std::optional<Walk::Step> Walk::next() {
  if (epoch_ >= options_.epochs) return std::nullopt;
  if (!begun_) {
    order_ = run_order(population_, options_, start_, epoch_);
    seq_ = epoch_ == start_.epoch ? start_.position : 0;
    begun_ = true;
  }
  Step step{epoch_, order_.size(), seq_ >= order_.size(), seq_, 0};
  if (step.end) {
    ++epoch_;
    begun_ = false;
    order_ = {};
    return step;
  }
  step.index = order_[seq_++];
  return step;
}

Gathering::Gathering(BatchBuilder& builder, const LoaderState& start)
    : builder_(builder),
      epoch_(start.epoch),
      position_(start.position),
      group_start_(start.position),
      skip_rows_(start.packed_delivered) {}

bool Gathering::take(std::unique_ptr<Work> w) {
  ++position_;
  if (!w->error) samples_.push_back(std::move(w));
  return position_ - group_start_ == builder_.group_size();
}

Result<bool> Gathering::build(core::ThreadPool* cpu, const std::atomic<bool>& stop, const BatchBuilder::Sink& sink) {
  if (!samples_.empty()) {
    MMFEED_ASSIGN_OR_RETURN(bool go_on, builder_.build(std::move(samples_), epoch_, group_start_, position_, skip_rows_,
                                                       batch_, cpu, stop, sink));
    samples_.clear();
    skip_rows_ = 0;
    if (!go_on) return false;
  }
  group_start_ = position_;
  return true;
}

void Gathering::next_epoch() {
  ++epoch_;
  position_ = 0;
  group_start_ = 0;
  batch_ = 0;
}

}  // namespace mmfeed::pipeline
