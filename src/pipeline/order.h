// The sample order: a pure function of (number of samples, seed, epoch, rank, world size).
// Each epoch shuffles all samples with a seeded Fisher-Yates (SplitMix64, so the order is the
// same on every platform and standard library), and rank r takes positions r, r + world,
// r + 2 * world, ... of that permutation. When the world does not divide the samples, the
// remainder policy decides: kKeep leaves the first ranks one sample more (disjoint and
// complete, but a data-parallel job whose ranks run different step counts hangs at the epoch's
// end); kPad extends the permutation with its own first samples to a multiple of the world
// (every rank the same count, at most world - 1 samples twice, as torch's DistributedSampler);
// kDrop cuts it to a multiple (at most world - 1 samples left out, different ones each epoch).
//
// Example:
//   std::vector<std::uint64_t> mine = rank_order(1000, /*seed=*/7, /*epoch=*/0, /*rank=*/1, /*world=*/4, true,
//                                                ShardRemainder::kPad);
#pragma once

#include <cstdint>
#include <vector>

#include "mmfeed/loader.h"

namespace mmfeed::pipeline {

using mmfeed::ShardRemainder;  // loader.h: kPad, kDrop, kKeep

std::vector<std::uint64_t> epoch_permutation(std::uint64_t n, std::uint64_t seed, int epoch, bool shuffle);
std::vector<std::uint64_t> rank_order(std::uint64_t n, std::uint64_t seed, int epoch, int rank, int world_size,
                                      bool shuffle, ShardRemainder remainder = ShardRemainder::kKeep);

// How many samples `rank` of `world_size` takes in an epoch of `n` (rank_order's length),
// computed, not listed: what a position within that rank's epoch is checked against.
std::uint64_t rank_epoch_size(std::uint64_t n, int rank, int world_size, ShardRemainder remainder = ShardRemainder::kKeep);

// After a change of world size: the epoch's samples that the old world (`old_world` ranks at
// `old_positions`, having also consumed the positions in `old_windows[r]` beyond, from rows of
// a packing window they delivered; empty: none) had not consumed, in epoch order, evened out by
// the remainder policy over the new world and dealt round-robin to `rank` of `world_size`.
std::vector<std::uint64_t> resharded_order(std::uint64_t n, std::uint64_t seed, int epoch, bool shuffle, int old_world,
                                           const std::vector<std::uint64_t>& old_positions,
                                           const std::vector<std::vector<std::uint64_t>>& old_windows, int rank,
                                           int world_size, ShardRemainder remainder = ShardRemainder::kKeep);

// The order a run of `config` that started at `start` has in `epoch`: resharded for the epoch a
// resume under another world started in, cut at end_position in its last epoch.
std::vector<std::uint64_t> run_order(std::uint64_t n, const LoaderConfig& config, const LoaderState& start, int epoch);

}  // namespace mmfeed::pipeline
