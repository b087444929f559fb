// How far the concurrent loader works ahead of the trainer: the batches it prepares (the prefetch
// depth) and the samples it may have in flight beyond what those batches need (the fetch
// allowance). Both are fixed when the user fixes the depth (prefetch_batches = N); automatic (0)
// they follow need:
// - The depth starts at one batch and grows by one, up to kMostAutomatic, each time the trainer
//   finds no batch ready although, since its previous wait, the depth held the loader back (the
//   batcher found the prefetch queue full): production is bursty, and a deeper queue absorbs the
//   bursts.
// - The allowance starts at zero and grows by one step (`step` samples), up to kMostExtraSteps
//   steps, each time the trainer waits while the reader's sample window is full and the workers
//   have nothing queued: the window's samples are waiting on storage (high fetch latency, or one
//   slow object holding the in-order release back), and only more of them in flight keeps the
//   workers busy (Little's law: in flight = rate x latency).
// - When, for kSettle batches in a row, the trainer never waited and always found at least two
//   batches ready, one step is given back (the allowance first, then the depth): that memory was
//   held for nothing (a loader much faster than its trainer, or a burst that has passed).
// A loader bound by its CPUs is neither held back nor starved, and keeps what it has: memory
// follows what keeps the trainer fed, not a fixed guess. The reader's sample window is
// sample_window(depth) + extra_samples(); the byte budget (max_buffered_bytes) bounds everything.
//
// Thread safety: none; the trainer's thread owns it (ConcurrentDriver::next).
//
// Example:
//   PrefetchDepth depth(config.prefetch_batches, /*step=*/config.batch_size);
//   if (queue_empty && depth.trainer_waited(held_back, starved)) resize(depth);
//   if (!queue_empty && depth.trainer_took(queue.size())) resize(depth);
#pragma once

#include <cstddef>

namespace mmfeed::pipeline {

class PrefetchDepth {
 public:
  static constexpr std::size_t kFirstAutomatic = 1;
  static constexpr std::size_t kMostAutomatic = 16;
  static constexpr std::size_t kMostExtraSteps = 32;
  static constexpr std::size_t kSettle = 64;

  // `configured`: prefetch_batches; 0 is automatic. `step`: samples the allowance grows by.
  explicit PrefetchDepth(std::size_t configured, std::size_t step = 1)
      : automatic_(configured == 0), batches_(configured == 0 ? kFirstAutomatic : configured), step_(step) {}

  std::size_t batches() const { return batches_; }
  std::size_t extra_samples() const { return extra_steps_ * step_; }
  bool automatic() const { return automatic_; }
  // The most extra_samples() can become.
  std::size_t most_extra_samples() const { return automatic_ ? kMostExtraSteps * step_ : 0; }

  // The trainer found no batch ready (not counting its first). `held_back`: since its previous
  // wait, the depth stopped the loader at least once. `starved`: now, the reader's window is full
  // and the workers have nothing queued. True when the depth or the allowance grew.
  bool trainer_waited(bool held_back, bool starved) {
    takes_ = 0;
    fewest_ready_ = kMostAutomatic;
    if (!automatic_) return false;
    if (held_back && batches_ < kMostAutomatic) {
      ++batches_;
      return true;
    }
    if (starved && extra_steps_ < kMostExtraSteps) {
      ++extra_steps_;
      return true;
    }
    return false;
  }

  // The trainer took a batch without waiting; `ready`: the batches it found ready, this one
  // included. True when the allowance or the depth shrank.
  bool trainer_took(std::size_t ready) {
    if (!automatic_) return false;
    fewest_ready_ = ready < fewest_ready_ ? ready : fewest_ready_;
    if (++takes_ < kSettle) return false;
    const bool spare = fewest_ready_ >= 2;
    takes_ = 0;
    fewest_ready_ = kMostAutomatic;
    if (!spare) return false;
    if (extra_steps_ > 0) {
      --extra_steps_;
      return true;
    }
    if (batches_ > kFirstAutomatic) {
      --batches_;
      return true;
    }
    return false;
  }

 private:
  const bool automatic_;
  std::size_t batches_;
  const std::size_t step_;
  std::size_t extra_steps_ = 0;
  std::size_t takes_ = 0;                      // since the last wait or settling
  std::size_t fewest_ready_ = kMostAutomatic;  // over those takes
};

}  // namespace mmfeed::pipeline
