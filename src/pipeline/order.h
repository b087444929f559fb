// The sample order: a pure function of (population, seed, epoch, rank, world size).
// Each epoch shuffles all samples with a seeded Fisher-Yates (SplitMix64, so the order is the
// same on every platform and standard library), and rank r takes positions r, r + world,
// r + 2 * world, ... of that permutation. When the world does not divide the samples, the
// remainder policy decides: kKeep leaves the first ranks one sample more (disjoint and
// complete, but a data-parallel job whose ranks run different step counts hangs at the epoch's
// end); kPad extends the permutation with its own first samples to a multiple of the world
// (every rank the same count, at most world - 1 samples twice, as torch's DistributedSampler);
// kDrop cuts it to a multiple (at most world - 1 samples left out, different ones each epoch).
//
// A blend (weights given, one per manifest) draws an epoch of `draws` samples instead: source s
// gets its share round(draws * W_s / W) - round(draws * W_{s-1} / W) of the draws (W_s the
// weights' running sum, so the shares add up to `draws` exactly and each is within one of its
// quota), the draws' sources are shuffled by the seed (spread evenly when not shuffling), and
// source s's j-th draw of the run takes position j mod n_s of that source's own epoch j / n_s,
// a permutation of its n_s samples seeded by (seed, s): no sample of a source comes twice before
// every sample of that source came once, across blend epochs too. Ranks, remainders and
// resharding work on a blend's epoch as on a plain one.
//
// Example:
//   std::vector<std::uint64_t> mine = rank_order(1000, /*seed=*/7, /*epoch=*/0, /*rank=*/1, /*world=*/4, true,
//                                                ShardRemainder::kPad);
//   const Population blend({600, 400}, {0.25, 0.75}, /*draws=*/0);   // 250 of the first, 750 of the second
//   std::vector<std::uint64_t> drawn = rank_order(blend, 7, 0, 1, 4, true);
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "mmfeed/loader.h"
#include "pipeline/stage_options.h"

namespace mmfeed::pipeline {

using mmfeed::ShardRemainder;  // loader.h: kPad, kDrop, kKeep

// The FLOPs a sample's forward pass costs, per unit (balance_cost's order; balance.h).
struct CostModel {
  double llm_token = 0, llm_pair = 0, vision_patch = 0, vision_pair = 0;
};

// A sample's cost by its index in the population under a cost model (balance.h); integers, so
// that every rank adds them up alike. Thread-safe.
using CostFn = std::function<std::uint64_t(std::uint64_t index, const CostModel& model)>;

// What an epoch draws from: the sources' sample counts (sample indices run through the sources
// in order) and, for a blend, their weights.
struct Population {
  std::vector<std::uint64_t> sizes;  // samples per source
  std::vector<double> weights;       // empty: the sources concatenated; else one per source
  std::uint64_t draws = 0;           // a blend's epoch length; 0: the sources' total
  CostFn cost;                       // set when the run balances its ranks by cost (balance.h)
  CostModel model;                   // the run's (cost_model), until a CostSwitch replaces it

  Population(std::uint64_t n) : sizes{n} {}  // NOLINT(google-explicit-constructor): one source of n
  Population(std::vector<std::uint64_t> source_sizes, std::vector<double> source_weights, std::uint64_t epoch_draws)
      : sizes(std::move(source_sizes)), weights(std::move(source_weights)), draws(epoch_draws) {}

  bool blend() const { return !weights.empty(); }
  std::uint64_t total() const;
  std::uint64_t epoch_length() const { return blend() && draws > 0 ? draws : total(); }
  // How many of an epoch's draws each source gets (a plain epoch: every source its size).
  std::vector<std::uint64_t> shares() const;
};

// What an epoch's order holds a draw while it is made: the draw (8 bytes), a blend's source (4)
// and the rank's share of the draws (8 at most).
inline constexpr std::uint64_t kOrderBytesPerDraw = 20;

// The manifests as the config blends them: one source per manifest, weighted when
// config.weights is given. A weighted source without samples is an error naming its manifest; a
// blend's epoch whose order would pass max_manifest_bytes (kOrderBytesPerDraw a draw) is an
// error naming blend_samples or source_repeats.
Result<Population> population_of(const LoaderConfig& config, const dataset::Manifests& manifests);

// An epoch's samples in order (a plain epoch: a permutation of all; a blend: its draws).
std::vector<std::uint64_t> epoch_permutation(const Population& population, std::uint64_t seed, int epoch, bool shuffle);
std::vector<std::uint64_t> rank_order(const Population& population, std::uint64_t seed, int epoch, int rank,
                                      int world_size, bool shuffle, ShardRemainder remainder = ShardRemainder::kKeep);

// How many samples `rank` of `world_size` takes in an epoch of length `n` (rank_order's length),
// computed, not listed: what a position within that rank's epoch is checked against.
std::uint64_t rank_epoch_size(std::uint64_t n, int rank, int world_size,
                              ShardRemainder remainder = ShardRemainder::kKeep);

// After a change of world size: the epoch's samples that the old world (`old_world` ranks at
// `old_positions`, having also consumed the positions in `old_windows[r]` beyond, from rows of
// a packing window they delivered; empty: none) had not consumed, in epoch order, evened out by
// the remainder policy over the new world and dealt round-robin to `rank` of `world_size`.
std::vector<std::uint64_t> resharded_order(const Population& population, std::uint64_t seed, int epoch, bool shuffle,
                                           int old_world, const std::vector<std::uint64_t>& old_positions,
                                           const std::vector<std::vector<std::uint64_t>>& old_windows, int rank,
                                           int world_size, ShardRemainder remainder = ShardRemainder::kKeep);

// The cost model step `step` of `epoch` is planned with: the last of `switches` at or before
// it, else `base`.
CostModel model_at(const CostModel& base, const std::vector<CostSwitch>& switches, int epoch, std::uint64_t step);

// A rank's order of an epoch: its position s is entry s x world + r of the epoch as dealt (the
// permutation evened out; after a resharding, what the old world left). When the run balances
// (options.balance_batch > 0 and population.cost), each step's world x balance_batches x
// balance_batch entries are split by cost (balance_step) when the step is first reached, so an
// epoch's plan costs nothing before its first batch; step k of `epoch` is priced by the model
// `switches` give it (model_at). Not thread-safe (the walk's own).
class EpochOrder {
 public:
  EpochOrder(std::vector<std::uint64_t> dealt, const Population& population, const OrderOptions& options,
             int world_size, std::uint64_t end, int epoch = 0, std::vector<CostSwitch> switches = {});

  std::uint64_t size() const { return size_; }
  // The sample at position `seq` < size().
  std::uint64_t at(std::uint64_t seq);
  // Every position's sample, in order.
  std::vector<std::uint64_t> all();
  // The whole epoch as dealt to every rank, every step arranged.
  const std::vector<std::uint64_t>& dealt();

  // The steps balanced so far: the largest rank cost over the mean, as drawn and as planned,
  // summed (their ratio to `steps` the mean), and a hash of the plan (FNV-1a over every rank's
  // samples of each step, as arranged): the same on every rank that has arranged as many steps.
  struct Stats {
    std::uint64_t steps = 0;
    double drawn = 0, planned = 0;
    std::uint64_t plan = kPlanSeed;

    static constexpr std::uint64_t kPlanSeed = 14695981039346656037ull;  // FNV-1a's offset basis
    void hash(std::uint64_t value);                                      // folds value into plan
    void add(const Stats& later);                                        // a later epoch's steps after these
  };
  const Stats& stats() const { return stats_; }

 private:
  void arrange_through(std::uint64_t p);  // every step up to the one holding entry p, balanced

  std::vector<std::uint64_t> dealt_;
  CostFn cost_;
  CostModel model_;
  int epoch_ = 0;
  std::vector<CostSwitch> switches_;
  std::size_t world_ = 1, rank_ = 0, batch_ = 0, step_ = 0;  // step_: a step's entries; 0: not balancing
  std::uint64_t size_ = 0;
  std::uint64_t balanced_ = 0;  // entries [0, balanced_) of dealt_ are arranged
  Stats stats_;
};

// The order a run that started at `start` has in `epoch`: resharded for the epoch a resume under
// another world started in, cut at end_position in its last epoch, balanced by cost when the run
// balances (the old world's steps as it balanced them, what they left as the new world's).
EpochOrder run_order(const Population& population, const OrderOptions& options, const LoaderState& start, int epoch);

}  // namespace mmfeed::pipeline
