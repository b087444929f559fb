#include "pipeline/order.h"

#include <algorithm>
#include <numeric>

namespace mmfeed::pipeline {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) by rejection, so the order does not depend on modulo bias tricks.
std::uint64_t below(std::uint64_t& state, std::uint64_t bound) {
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  std::uint64_t v;
  do {
    v = splitmix64(state);
  } while (v >= limit);
  return v % bound;
}

// `order` made a multiple of `world` long by the policy (repeating its own first entries, or
// cutting its tail).
std::vector<std::uint64_t> even_out(std::vector<std::uint64_t> order, int world, ShardRemainder remainder) {
  const auto w = static_cast<std::uint64_t>(world);
  const std::uint64_t n = order.size();
  if (n % w == 0 || remainder == ShardRemainder::kKeep) return order;
  if (remainder == ShardRemainder::kDrop) {
    order.resize(n / w * w);
    return order;
  }
  const std::uint64_t padded = (n + w - 1) / w * w;
  for (std::uint64_t p = n; p < padded; ++p) order.push_back(order[p % n]);
  return order;
}

}  // namespace

std::vector<std::uint64_t> epoch_permutation(std::uint64_t n, std::uint64_t seed, int epoch, bool shuffle) {
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle || n < 2) return order;
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch) * 0xD1B54A32D192ED03ull + 1;
  for (std::uint64_t i = n - 1; i > 0; --i) std::swap(order[i], order[below(state, i + 1)]);
  return order;
}

std::uint64_t rank_epoch_size(std::uint64_t n, int rank, int world_size, ShardRemainder remainder) {
  const auto w = static_cast<std::uint64_t>(world_size);
  const auto r = static_cast<std::uint64_t>(rank);
  std::uint64_t total = n;  // even_out's length
  if (n % w != 0 && remainder == ShardRemainder::kPad) total = (n + w - 1) / w * w;
  if (n % w != 0 && remainder == ShardRemainder::kDrop) total = n / w * w;
  return r < total ? (total - r + w - 1) / w : 0;
}

std::vector<std::uint64_t> rank_order(std::uint64_t n, std::uint64_t seed, int epoch, int rank, int world_size,
                                      bool shuffle, ShardRemainder remainder) {
  const std::vector<std::uint64_t> all = even_out(epoch_permutation(n, seed, epoch, shuffle), world_size, remainder);
  std::vector<std::uint64_t> mine;
  for (std::uint64_t p = static_cast<std::uint64_t>(rank); p < all.size(); p += static_cast<std::uint64_t>(world_size)) {
    mine.push_back(all[p]);
  }
  return mine;
}

std::vector<std::uint64_t> resharded_order(std::uint64_t n, std::uint64_t seed, int epoch, bool shuffle, int old_world,
                                           const std::vector<std::uint64_t>& old_positions,
                                           const std::vector<std::vector<std::uint64_t>>& old_windows, int rank,
                                           int world_size, ShardRemainder remainder) {
  // The old world's positions index its evened-out permutation.
  const std::vector<std::uint64_t> all = even_out(epoch_permutation(n, seed, epoch, shuffle), old_world, remainder);
  std::vector<bool> consumed(all.size(), false);
  for (int r = 0; r < old_world; ++r) {
    // Old rank r took permutation positions r, r + W, ...; its first old_positions[r] are done,
    // and so are the window positions it delivered in packed rows.
    auto consume = [&](std::uint64_t k) {
      const std::uint64_t p = static_cast<std::uint64_t>(r) + k * static_cast<std::uint64_t>(old_world);
      if (p < all.size()) consumed[p] = true;
    };
    // Positions past the old rank's epoch consume nothing: the loop stops at its end, however
    // large the position a state names.
    const std::uint64_t done = std::min(old_positions[static_cast<std::size_t>(r)],
                                        (all.size() + static_cast<std::uint64_t>(old_world) - 1) / static_cast<std::uint64_t>(old_world));
    for (std::uint64_t k = 0; k < done; ++k) consume(k);
    if (static_cast<std::size_t>(r) < old_windows.size()) {
      for (std::uint64_t k : old_windows[static_cast<std::size_t>(r)]) consume(k);
    }
  }
  std::vector<std::uint64_t> left;
  for (std::uint64_t p = 0; p < all.size(); ++p) {
    if (!consumed[p]) left.push_back(all[p]);
  }
  left = even_out(std::move(left), world_size, remainder);
  std::vector<std::uint64_t> mine;
  for (std::uint64_t i = static_cast<std::uint64_t>(rank); i < left.size(); i += static_cast<std::uint64_t>(world_size)) {
    mine.push_back(left[i]);
  }
  return mine;
}

std::vector<std::uint64_t> run_order(std::uint64_t n, const LoaderConfig& config, const LoaderState& start, int epoch) {
  std::vector<std::uint64_t> order =
      epoch == start.epoch && start.old_world_size > 0
          ? resharded_order(n, config.seed, epoch, config.shuffle, start.old_world_size, start.old_positions,
                            start.old_windows, config.rank, config.world_size, config.shard_remainder)
          : rank_order(n, config.seed, epoch, config.rank, config.world_size, config.shuffle, config.shard_remainder);
  if (config.end_position > 0 && epoch == config.epochs - 1 && config.end_position < order.size()) {
    order.resize(config.end_position);  // a part of the epoch: its groups are the full run's
  }
  return order;
}

}  // namespace mmfeed::pipeline
