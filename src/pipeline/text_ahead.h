// The positions a driver will reach next, walked ahead of it (the same walk, a step count apart),
// their samples' remote text (a remote manifest's lines, remote shards' headers) asked for in
// batches: used by both drivers where a sample's text costs a round trip
// (SampleProcessor::reads_text_remotely).
//
// Example:
//   std::optional<TextAhead> ahead;
//   if (s.processor.reads_text_remotely()) ahead.emplace(s, order);
//   for (...; step = walk.next()) { if (ahead) ahead->reach(reached++); ... }
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pipeline/driver.h"
#include "pipeline/walk.h"

namespace mmfeed::pipeline {

inline constexpr std::uint64_t kTextAhead = 64;  // samples whose remote text is asked for ahead, at most
inline constexpr std::uint64_t kTextBatch = 32;  // asked for together (their adjacent ranges one GET)

class TextAhead {
 public:
  TextAhead(const Stages& s, const OrderOptions& order)
      : processor_(s.processor), walk_(s.population, order, s.start, nullptr) {}

  // The driver is at its `reached`-th sample: keep the text of the next ones asked for.
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

}  // namespace mmfeed::pipeline
