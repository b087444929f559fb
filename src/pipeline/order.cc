#include "pipeline/order.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <queue>
#include <span>
#include <string>

#include "pipeline/balance.h"

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

std::vector<std::uint64_t> permutation(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch, bool shuffle) {
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle || n < 2) return order;
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + epoch * 0xD1B54A32D192ED03ull + 1;
  for (std::uint64_t i = n - 1; i > 0; --i) std::swap(order[i], order[below(state, i + 1)]);
  return order;
}

// The sources of a blend epoch's draws, `shares[s]` of source s: shuffled, or spread evenly
// (source s's k-th draw at time (k + 1/2) / shares[s], ties to the lower source).
std::vector<std::uint32_t> draw_sources(const std::vector<std::uint64_t>& shares, std::uint64_t seed, int epoch,
                                        bool shuffle) {
  std::vector<std::uint32_t> sources;
  if (shuffle) {
    for (std::size_t s = 0; s < shares.size(); ++s) {
      sources.insert(sources.end(), shares[s], static_cast<std::uint32_t>(s));
    }
    std::uint64_t state = (seed ^ 0xB1E4D5A3C2F10987ull) * 0x9E3779B97F4A7C15ull +
                          static_cast<std::uint64_t>(epoch) * 0xD1B54A32D192ED03ull + 1;
    for (std::size_t i = sources.size(); i > 1; --i) std::swap(sources[i - 1], sources[below(state, i)]);
    return sources;
  }
  struct Next {
    std::uint64_t k, share;
    std::uint32_t source;
  };
  // a before b when a's time (2k + 1) / (2 share) is later: the queue's top is the earliest.
  auto later = [](const Next& a, const Next& b) {
    const unsigned __int128 ta = static_cast<unsigned __int128>(2 * a.k + 1) * b.share;
    const unsigned __int128 tb = static_cast<unsigned __int128>(2 * b.k + 1) * a.share;
    return ta != tb ? ta > tb : a.source > b.source;
  };
  std::priority_queue<Next, std::vector<Next>, decltype(later)> queue(later);
  for (std::size_t s = 0; s < shares.size(); ++s) {
    if (shares[s] > 0) queue.push({0, shares[s], static_cast<std::uint32_t>(s)});
  }
  while (!queue.empty()) {
    Next next = queue.top();
    queue.pop();
    sources.push_back(next.source);
    if (++next.k < next.share) queue.push(next);
  }
  return sources;
}

std::vector<std::uint64_t> blend_epoch(const Population& p, std::uint64_t seed, int epoch, bool shuffle) {
  const std::vector<std::uint64_t> shares = p.shares();
  const std::vector<std::uint32_t> sources = draw_sources(shares, seed, epoch, shuffle);
  std::vector<std::uint64_t> first(p.sizes.size(), 0);  // each source's first sample index
  for (std::size_t s = 1; s < p.sizes.size(); ++s) first[s] = first[s - 1] + p.sizes[s - 1];
  std::vector<std::uint64_t> drawn(p.sizes.size(), 0);          // draws so far this epoch
  std::vector<std::uint64_t> pass(p.sizes.size(), UINT64_MAX);  // the source epoch `current` holds
  std::vector<std::vector<std::uint64_t>> current(p.sizes.size());
  std::vector<std::uint64_t> out;
  out.reserve(sources.size());
  for (const std::uint32_t s : sources) {
    const std::uint64_t j = static_cast<std::uint64_t>(epoch) * shares[s] + drawn[s]++;  // the run's j-th draw of s
    const std::uint64_t n = p.sizes[s];
    if (pass[s] != j / n) {
      pass[s] = j / n;
      const std::uint64_t source_seed = seed ^ ((static_cast<std::uint64_t>(s) + 1) * 0xC2B2AE3D27D4EB4Full);
      current[s] = permutation(n, source_seed, pass[s], shuffle);
    }
    out.push_back(first[s] + current[s][j % n]);
  }
  return out;
}

}  // namespace

std::uint64_t Population::total() const { return std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0}); }

std::vector<std::uint64_t> Population::shares() const {
  if (!blend()) return sizes;
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  const std::uint64_t length = epoch_length();
  std::vector<std::uint64_t> shares(sizes.size(), 0);
  // The last weighted source takes what rounding left: a source of weight 0 never draws.
  std::size_t last = 0;
  for (std::size_t s = 0; s < sizes.size(); ++s) last = weights[s] > 0 ? s : last;
  double running = 0;
  std::uint64_t before = 0;
  for (std::size_t s = 0; s <= last; ++s) {
    if (!(weights[s] > 0)) continue;
    running += weights[s];
    const std::uint64_t upto = s == last ? length
                                         : std::min(length, static_cast<std::uint64_t>(std::floor(
                                                                static_cast<double>(length) * (running / sum) + 0.5)));
    shares[s] = upto > before ? upto - before : 0;
    before = std::max(before, upto);
  }
  return shares;
}

Result<Population> population_of(const LoaderConfig& config, const dataset::Manifests& manifests) {
  std::vector<std::uint64_t> sizes;
  for (const dataset::Manifest& m : manifests.files) sizes.push_back(m.line_count);
  if (config.weights.empty() && config.source_repeats.empty()) return Population(manifests.size());
  const bool by_repeats = !config.source_repeats.empty();
  std::vector<double> weights = by_repeats ? config.source_repeats : config.weights;
  double draws = 0;  // by repeats: each source's repeats times its size
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    if (sizes[s] == 0 && weights[s] > 0) {
      return Error(ErrorCode::kInvalidArgument,
                   "manifest " + manifests.files[s].name + " holds no sample, but its " +
                       (by_repeats ? "repeats are " : "weight is ") + std::to_string(weights[s]) +
                       ": give it samples or 0",
                   by_repeats ? "LoaderConfig.source_repeats" : "LoaderConfig.weights");
    }
    if (by_repeats) {
      weights[s] *= static_cast<double>(sizes[s]);
      draws += weights[s];
    }
  }
  // An epoch's order is held whole (epoch_permutation): the draws are bounded before any is
  // made, as the manifests are, by max_manifest_bytes.
  const std::uint64_t most = config.max_manifest_bytes / kOrderBytesPerDraw;
  const auto too_many = [&](const char* field, const std::string& draws_text) {
    return Error(ErrorCode::kInvalidArgument,
                 "an epoch of " + draws_text + " draws: its order would hold " + std::to_string(kOrderBytesPerDraw) +
                     " bytes a draw, more than max_manifest_bytes (" + std::to_string(config.max_manifest_bytes) +
                     ") allows (" + std::to_string(most) + " draws); lower it, or raise max_manifest_bytes",
                 std::string("LoaderConfig.") + field);
  };
  if (config.blend_samples > most) return too_many("blend_samples", std::to_string(config.blend_samples));
  if (config.blend_samples == 0 && by_repeats && !(draws <= static_cast<double>(most))) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", draws);
    return too_many("source_repeats", text);
  }
  const std::uint64_t length =
      config.blend_samples > 0 || !by_repeats ? config.blend_samples : static_cast<std::uint64_t>(std::llround(draws));
  if (by_repeats && length == 0) {
    return Error(ErrorCode::kInvalidArgument, "the repeats draw no sample in an epoch", "LoaderConfig.source_repeats");
  }
  return Population(std::move(sizes), std::move(weights), length);
}

std::vector<std::uint64_t> epoch_permutation(const Population& population, std::uint64_t seed, int epoch,
                                             bool shuffle) {
  return population.blend() ? blend_epoch(population, seed, epoch, shuffle)
                            : permutation(population.total(), seed, static_cast<std::uint64_t>(epoch), shuffle);
}

std::uint64_t rank_epoch_size(std::uint64_t n, int rank, int world_size, ShardRemainder remainder) {
  const auto w = static_cast<std::uint64_t>(world_size);
  const auto r = static_cast<std::uint64_t>(rank);
  std::uint64_t total = n;  // even_out's length
  if (n % w != 0 && remainder == ShardRemainder::kPad) total = (n + w - 1) / w * w;
  if (n % w != 0 && remainder == ShardRemainder::kDrop) total = n / w * w;
  return r < total ? (total - r + w - 1) / w : 0;
}

namespace {

// Rank `rank`'s entries of `dealt` (positions rank, rank + world, ...).
std::vector<std::uint64_t> dealt_to(const std::vector<std::uint64_t>& dealt, int rank, int world_size) {
  std::vector<std::uint64_t> mine;
  for (std::uint64_t p = static_cast<std::uint64_t>(rank); p < dealt.size();
       p += static_cast<std::uint64_t>(world_size)) {
    mine.push_back(dealt[p]);
  }
  return mine;
}

// What the old world (`old_world` ranks at `old_positions`, and the window positions of
// `old_windows`) had not consumed of `all`, its epoch as it dealt it, in epoch order, evened out
// over `world_size` ranks.
std::vector<std::uint64_t> left_over(const std::vector<std::uint64_t>& all, int old_world,
                                     const std::vector<std::uint64_t>& old_positions,
                                     const std::vector<std::vector<std::uint64_t>>& old_windows, int world_size,
                                     ShardRemainder remainder) {
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
    const std::uint64_t done =
        std::min(old_positions[static_cast<std::size_t>(r)],
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
  return even_out(std::move(left), world_size, remainder);
}

}  // namespace

std::vector<std::uint64_t> rank_order(const Population& population, std::uint64_t seed, int epoch, int rank,
                                      int world_size, bool shuffle, ShardRemainder remainder) {
  return dealt_to(even_out(epoch_permutation(population, seed, epoch, shuffle), world_size, remainder), rank,
                  world_size);
}

std::vector<std::uint64_t> resharded_order(const Population& population, std::uint64_t seed, int epoch, bool shuffle,
                                           int old_world, const std::vector<std::uint64_t>& old_positions,
                                           const std::vector<std::vector<std::uint64_t>>& old_windows, int rank,
                                           int world_size, ShardRemainder remainder) {
  // The old world's positions index its evened-out permutation.
  const std::vector<std::uint64_t> all =
      even_out(epoch_permutation(population, seed, epoch, shuffle), old_world, remainder);
  return dealt_to(left_over(all, old_world, old_positions, old_windows, world_size, remainder), rank, world_size);
}

void EpochOrder::Stats::hash(std::uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) {
    plan = (plan ^ ((value >> (8 * byte)) & 0xFF)) * 1099511628211ull;  // FNV-1a's prime
  }
}

void EpochOrder::Stats::add(const Stats& later) {
  steps += later.steps;
  drawn += later.drawn;
  planned += later.planned;
  hash(later.plan);
}

CostModel model_at(const CostModel& base, const std::vector<CostSwitch>& switches, int epoch, std::uint64_t step) {
  CostModel model = base;
  for (const CostSwitch& s : switches) {
    if (std::pair{s.epoch, s.step} > std::pair{epoch, step}) break;
    model = CostModel{s.cost[0], s.cost[1], s.cost[2], s.cost[3]};
  }
  return model;
}

EpochOrder::EpochOrder(std::vector<std::uint64_t> dealt, const Population& population, const OrderOptions& options,
                       int world_size, std::uint64_t end, int epoch, std::vector<CostSwitch> switches)
    : dealt_(std::move(dealt)),
      cost_(population.cost),
      model_(population.model),
      epoch_(epoch),
      switches_(std::move(switches)),
      world_(static_cast<std::size_t>(world_size)),
      rank_(static_cast<std::size_t>(options.rank)),
      batch_(options.balance_batch) {
  if (batch_ > 0 && cost_) step_ = world_ * batch_ * std::max<std::size_t>(options.balance_batches, 1);
  size_ = rank_ < dealt_.size() ? (dealt_.size() - rank_ + world_ - 1) / world_ : 0;
  if (end > 0) size_ = std::min(size_, end);
}

std::uint64_t EpochOrder::at(std::uint64_t seq) {
  const std::uint64_t p = seq * world_ + rank_;
  arrange_through(p);
  return dealt_[p];
}

void EpochOrder::arrange_through(std::uint64_t p) {
  while (step_ > 0 && balanced_ <= p) {
    const std::uint64_t last = std::min<std::uint64_t>(balanced_ + step_, dealt_.size());
    const std::span<std::uint64_t> slab(dealt_.data() + balanced_, last - balanced_);
    const CostModel model = model_at(model_, switches_, epoch_, balanced_ / step_);
    std::vector<std::uint64_t> costs(slab.size());
    for (std::size_t i = 0; i < slab.size(); ++i) costs[i] = cost_(slab[i], model);
    const StepCost drawn = step_cost(costs, static_cast<int>(world_));
    balance_step(slab, costs, static_cast<int>(world_), batch_);
    const StepCost planned = step_cost(costs, static_cast<int>(world_));
    if (drawn.mean > 0) {
      ++stats_.steps;
      stats_.drawn += static_cast<double>(drawn.max) / drawn.mean;
      stats_.planned += static_cast<double>(planned.max) / planned.mean;
    }
    for (const std::uint64_t sample : slab) stats_.hash(sample);
    balanced_ = last;
  }
}

std::vector<std::uint64_t> EpochOrder::all() {
  std::vector<std::uint64_t> mine(size_);
  for (std::uint64_t s = 0; s < size_; ++s) mine[s] = at(s);
  return mine;
}

const std::vector<std::uint64_t>& EpochOrder::dealt() {
  if (!dealt_.empty()) arrange_through(dealt_.size() - 1);
  return dealt_;
}

EpochOrder run_order(const Population& population, const OrderOptions& options, const LoaderState& start, int epoch) {
  const OrderOptions& o = options;
  const std::uint64_t end = o.end_position > 0 && epoch == o.epochs - 1 ? o.end_position : 0;
  std::vector<std::uint64_t> all =
      even_out(epoch_permutation(population, o.seed, epoch, o.shuffle),
               epoch == start.epoch && start.old_world_size > 0 ? start.old_world_size : o.world_size, o.remainder);
  if (epoch != start.epoch || start.old_world_size <= 0) {
    return EpochOrder(std::move(all), population, o, o.world_size, end, epoch, start.cost_switches);
  }
  // A resume under another world: the old world's steps as it arranged them (balanced, when it
  // balanced), what it left dealt to this world (and balanced in this world's steps).
  EpochOrder old(std::move(all), population,
                 OrderOptions{o.seed, o.shuffle, 0, start.old_world_size, o.remainder, o.epochs, 0, o.balance_batch,
                              o.balance_batches},
                 start.old_world_size, 0, epoch, start.old_cost_switches);
  return EpochOrder(
      left_over(old.dealt(), start.old_world_size, start.old_positions, start.old_windows, o.world_size, o.remainder),
      population, o, o.world_size, end, epoch, start.cost_switches);
}

}  // namespace mmfeed::pipeline
