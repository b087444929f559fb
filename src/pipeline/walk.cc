#include "pipeline/walk.h"

namespace mmfeed::pipeline {

Walk::Walk(const Population& population, const OrderOptions& options, LoaderState start, core::MetricsRegistry* metrics)
    : population_(population), options_(options), start_(std::move(start)), epoch_(start_.epoch), metrics_(metrics) {}

EpochOrder::Stats Walk::balance() const {
  EpochOrder::Stats s = balance_;
  if (order_) s.add(order_->stats());
  return s;
}

void Walk::publish() {
  const EpochOrder::Stats s = balance();
  if (metrics_ == nullptr || s.steps == published_) return;
  published_ = s.steps;
  const auto ppm = [&](double sum) { return static_cast<std::int64_t>(sum / static_cast<double>(s.steps) * 1e6); };
  metrics_->gauge("balance.steps").set(static_cast<std::int64_t>(s.steps));
  metrics_->gauge("balance.drawn_max_over_mean_ppm").set(ppm(s.drawn));
  metrics_->gauge("balance.planned_max_over_mean_ppm").set(ppm(s.planned));
  metrics_->gauge("balance.plan_hash").set(static_cast<std::int64_t>(s.plan >> 1));  // (a gauge is signed)
}

std::optional<Walk::Step> Walk::next() {
  if (epoch_ >= options_.epochs) return std::nullopt;
  if (!order_) {
    order_.emplace(run_order(population_, options_, start_, epoch_));
    seq_ = epoch_ == start_.epoch ? start_.position : 0;
  }
  Step step{epoch_, order_->size(), seq_ >= order_->size(), seq_, 0};
  if (step.end) {
    ++epoch_;
    balance_.add(order_->stats());
    order_.reset();
    return step;
  }
  step.index = order_->at(seq_++);
  publish();
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
