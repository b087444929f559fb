// How many batches the concurrent loader prepares ahead of the trainer: fixed when the user says
// (prefetch_batches = N), else (0, automatic) it follows need. Automatic, it starts at one batch
// and grows by one, up to kMostAutomatic, each time the trainer finds no batch ready although,
// since its previous wait, the depth held the loader back (the batcher found the prefetch queue
// full): production is bursty, and a deeper queue absorbs the bursts. A loader slower than its
// trainer is not held back, gains nothing from a deeper queue, and keeps its depth: memory follows
// what keeps the trainer fed, not a fixed guess. The reader's sample window grows with the depth
// (sample_window); the byte budget (max_buffered_bytes) bounds both.
//
// Thread safety: none; the trainer's thread owns it (ConcurrentDriver::next).
//
// Example:
//   PrefetchDepth depth(config.prefetch_batches);
//   queue.set_capacity(depth.batches());
//   if (queue_empty && depth.trainer_waited(held_back)) queue.set_capacity(depth.batches());
#pragma once

#include <cstddef>

namespace mmfeed::pipeline {

class PrefetchDepth {
 public:
  static constexpr std::size_t kFirstAutomatic = 1;
  static constexpr std::size_t kMostAutomatic = 16;

  // `configured`: prefetch_batches; 0 is automatic.
  explicit PrefetchDepth(std::size_t configured)
      : automatic_(configured == 0), batches_(configured == 0 ? kFirstAutomatic : configured) {}

  std::size_t batches() const { return batches_; }
  bool automatic() const { return automatic_; }

  // The trainer found no batch ready (not counting its first). `held_back`: since its previous
  // wait, the depth stopped the loader at least once. True when the depth grew.
  bool trainer_waited(bool held_back) {
    if (!automatic_ || !held_back || batches_ >= kMostAutomatic) return false;
    ++batches_;
    return true;
  }

 private:
  const bool automatic_;
  std::size_t batches_;
};

}  // namespace mmfeed::pipeline
