// The split of a step's samples across ranks and batches by their costs (balance.h): equal
// counts (balance_step, the Loader's plan) and free counts (free_split, the report's), with the
// largest-first fill, moves and swaps they share.
#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "pipeline/balance.h"

namespace mmfeed::pipeline {

namespace {

struct Item {
  std::uint64_t cost = 0;
  std::uint32_t at = 0;  // its place in the slab (or the rank's list)
};

struct Bin {
  std::vector<Item> items;
  std::uint64_t load = 0;
  std::size_t room = 0;
};

// The largest-first fill, a round at a time: of the items sorted costliest first, each round of
// as many as there are bins with room goes one to each, the costliest to the least loaded (ties:
// the lower bin).
void fill(std::vector<Item> items, std::vector<Bin>& bins) {
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.cost != b.cost ? a.cost > b.cost : a.at < b.at; });
  std::vector<std::size_t> open;
  for (std::size_t next = 0; next < items.size();) {
    open.clear();
    for (std::size_t b = 0; b < bins.size(); ++b) {
      if (bins[b].room > 0) open.push_back(b);
    }
    std::sort(open.begin(), open.end(), [&](std::size_t a, std::size_t b) {
      return bins[a].load != bins[b].load ? bins[a].load < bins[b].load : a < b;
    });
    for (std::size_t k = 0; k < open.size() && next < items.size(); ++k, ++next) {
      Bin& bin = bins[open[k]];
      bin.items.push_back(items[next]);
      bin.load += items[next].cost;
      --bin.room;
    }
  }
}

bool cheaper(const Item& a, const Item& b) { return a.cost != b.cost ? a.cost < b.cost : a.at < b.at; }

// The swap between the fullest bin `hi` and bin `lo` (each sorted by cost) that best lowers the
// larger of the two: an item a of hi for an item x of lo with d = a - x in (0, gap), closest to
// gap / 2; false if none.
bool swap_best(Bin& hi, Bin& lo) {
  const std::uint64_t gap = hi.load - lo.load;
  std::uint64_t best_gain = 0;
  std::size_t best_a = 0, best_x = 0;
  for (std::size_t a = 0; a < hi.items.size(); ++a) {
    const std::uint64_t ca = hi.items[a].cost;
    // Wanted: x near ca - gap / 2, and x > ca - gap (d < gap), x < ca (d > 0).
    const std::uint64_t target = ca > gap / 2 ? ca - gap / 2 : 0;
    const auto it = std::lower_bound(lo.items.begin(), lo.items.end(), target,
                                     [](const Item& i, std::uint64_t v) { return i.cost < v; });
    for (const auto c : {it, it == lo.items.begin() ? lo.items.end() : it - 1}) {
      if (c == lo.items.end() || c->cost >= ca || ca - c->cost >= gap) continue;
      const std::uint64_t d = ca - c->cost;
      const std::uint64_t gain = std::min(d, gap - d);  // how much the larger of the two falls
      if (gain > best_gain) {
        best_gain = gain;
        best_a = a;
        best_x = static_cast<std::size_t>(c - lo.items.begin());
      }
    }
  }
  if (best_gain == 0) return false;
  const std::uint64_t d = hi.items[best_a].cost - lo.items[best_x].cost;
  std::swap(hi.items[best_a], lo.items[best_x]);
  hi.load -= d;
  lo.load += d;
  std::sort(hi.items.begin(), hi.items.end(), cheaper);
  std::sort(lo.items.begin(), lo.items.end(), cheaper);
  return true;
}

// Swaps that lower the fullest bin, tried against the others (the emptiest first), until none
// does, the fullest is within 1/kClose of the mean, or kTries x bins swaps were tried (a bound on
// the plan's time that every rank meets at the same swap). The bins are kept ordered by load
// (ties: the lower bin), so a round costs a few set updates, not a sort.
constexpr std::uint64_t kClose = 256;
constexpr std::size_t kTries = 24;

void refine(std::vector<Bin>& bins) {
  std::uint64_t total = 0;
  std::set<std::pair<std::uint64_t, std::size_t>> by_load;
  for (std::size_t b = 0; b < bins.size(); ++b) {
    std::sort(bins[b].items.begin(), bins[b].items.end(), cheaper);
    by_load.emplace(bins[b].load, b);
    total += bins[b].load;
  }
  const std::uint64_t floor_mean = total / std::max<std::size_t>(bins.size(), 1);
  std::size_t tries = kTries * bins.size();
  while (by_load.size() > 1) {
    const std::size_t h = std::prev(by_load.end())->second;
    if (bins[h].load <= floor_mean + 1 + floor_mean / kClose) return;  // at the mean, near enough
    std::optional<std::size_t> partner;
    const std::uint64_t was_h = bins[h].load;
    std::uint64_t was_l = 0;
    for (auto it = by_load.begin(); it->second != h && !partner; ++it) {
      if (bins[h].load - it->first < 2 || tries == 0) return;  // the others are fuller still; or time is up
      --tries;
      was_l = it->first;
      if (swap_best(bins[h], bins[it->second])) partner = it->second;
    }
    if (!partner) return;
    by_load.erase({was_h, h});  // (the loop above no longer walks the set)
    by_load.erase({was_l, *partner});
    by_load.emplace(bins[h].load, h);
    by_load.emplace(bins[*partner].load, *partner);
  }
}

// `items` split into bins of the given rooms, the largest load least.
std::vector<Bin> partition(std::vector<Item> items, const std::vector<std::size_t>& rooms) {
  std::vector<Bin> bins(rooms.size());
  for (std::size_t b = 0; b < rooms.size(); ++b) bins[b].room = rooms[b];
  fill(std::move(items), bins);
  refine(bins);
  return bins;
}

// The move from the fullest bin `hi` (above `least` items) to bin `lo` (below `most`) of the item
// that best lowers the larger of the two: cost c in (0, gap), closest to gap / 2; false if none.
bool move_best(Bin& hi, Bin& lo, std::size_t least, std::size_t most) {
  if (hi.items.size() <= least || lo.items.size() >= most || hi.load <= lo.load) return false;
  const std::uint64_t gap = hi.load - lo.load;
  std::uint64_t best_gain = 0;
  std::size_t best = 0;
  for (std::size_t a = 0; a < hi.items.size(); ++a) {
    const std::uint64_t c = hi.items[a].cost;
    const std::uint64_t gain = c > 0 && c < gap ? std::min(c, gap - c) : 0;
    if (gain > best_gain) {
      best_gain = gain;
      best = a;
    }
  }
  if (best_gain == 0) return false;
  const Item moved = hi.items[best];
  hi.items.erase(hi.items.begin() + static_cast<std::ptrdiff_t>(best));
  hi.load -= moved.cost;
  lo.items.push_back(moved);
  lo.load += moved.cost;
  std::sort(lo.items.begin(), lo.items.end(), cheaper);
  return true;
}

// A move from the fullest bin to the lightest that lowers it (move_best); false if none does.
bool move_from_fullest(std::vector<Bin>& bins, std::size_t least, std::size_t most) {
  const auto by_load = [&](std::size_t a, std::size_t b) {
    return bins[a].load != bins[b].load ? bins[a].load < bins[b].load : a < b;
  };
  std::vector<std::size_t> order(bins.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), by_load);
  Bin& fullest = bins[order.back()];
  for (std::size_t k = 0; k + 1 < order.size(); ++k) {
    if (move_best(fullest, bins[order[k]], least, most)) return true;
  }
  return false;
}

// `items` split into `count` bins of `least` to `most` items each (so that the items fill them:
// count x least <= items <= count x most), the largest load least: largest first to the least
// loaded bin with room (to the bins still short of `least` when no more items are left than they
// lack), then moves from the fullest bin to the lightest that lowers it, then refine()'s swaps.
std::vector<Bin> partition_free(std::vector<Item> items, std::size_t count, std::size_t least, std::size_t most) {
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.cost != b.cost ? a.cost > b.cost : a.at < b.at; });
  std::vector<Bin> bins(count);
  std::size_t short_of = count * least;  // what the bins still lack of `least`
  for (std::size_t next = 0; next < items.size(); ++next) {
    const bool must_fill = items.size() - next <= short_of;
    std::optional<std::size_t> to;
    for (std::size_t b = 0; b < count; ++b) {
      const std::size_t held = bins[b].items.size();
      if (held >= most || (must_fill && held >= least)) continue;
      if (!to || bins[b].load < bins[*to].load) to = b;
    }
    if (bins[*to].items.size() < least) --short_of;
    bins[*to].items.push_back(items[next]);
    bins[*to].load += items[next].cost;
  }
  for (Bin& b : bins) std::sort(b.items.begin(), b.items.end(), cheaper);
  for (std::size_t tries = kTries * count; tries > 0; --tries) {
    if (!move_from_fullest(bins, least, most)) break;
  }
  refine(bins);
  return bins;
}

}  // namespace

std::vector<std::vector<std::size_t>> free_split(std::span<const std::uint64_t> costs, int world, std::size_t least,
                                                 std::size_t most) {
  const auto w = static_cast<std::size_t>(world);
  std::vector<Item> items(costs.size());
  for (std::size_t i = 0; i < costs.size(); ++i) items[i] = {costs[i], static_cast<std::uint32_t>(i)};
  std::vector<Bin> bins = partition_free(items, w, least, most);
  // Equal counts are one of the splits allowed: the free plan is never worse than theirs.
  const std::size_t n = costs.size() / w;
  if (costs.size() % w == 0 && least <= n && n <= most) {
    std::vector<Bin> equal = partition(std::move(items), std::vector<std::size_t>(w, n));
    const auto largest = [](const std::vector<Bin>& split) {
      return std::max_element(split.begin(), split.end(), [](const Bin& a, const Bin& b) { return a.load < b.load; })
          ->load;
    };
    if (largest(equal) < largest(bins)) bins = std::move(equal);
  }
  std::vector<std::vector<std::size_t>> ranks;
  for (const Bin& b : bins) {
    ranks.emplace_back();
    for (const Item& item : b.items) ranks.back().push_back(item.at);
    std::sort(ranks.back().begin(), ranks.back().end());
  }
  return ranks;
}

void balance_step(std::span<std::uint64_t> slab, std::span<std::uint64_t> costs, int world, std::size_t batch) {
  const auto w = static_cast<std::size_t>(world);
  // (Items name their place in 32 bits: a step of more samples is left as drawn.)
  if (slab.size() % w != 0 || slab.empty() || batch == 0 || slab.size() > UINT32_MAX) return;
  const std::size_t n = slab.size() / w;
  std::vector<Item> items(slab.size());
  for (std::size_t i = 0; i < slab.size(); ++i) items[i] = {costs[i], static_cast<std::uint32_t>(i)};
  std::vector<Bin> ranks = partition(items, std::vector<std::size_t>(w, n));
  std::vector<std::size_t> rooms(n / batch, batch);
  if (n % batch != 0) rooms.push_back(n % batch);
  const std::vector<std::uint64_t> drawn(slab.begin(), slab.end());
  for (std::size_t r = 0; r < w; ++r) {
    std::size_t k = 0;
    std::vector<Bin> batches;
    if (rooms.size() == 1) {
      batches.push_back(std::move(ranks[r]));  // one batch a step: nothing to split
    } else {
      batches = partition(std::move(ranks[r].items), rooms);
    }
    for (Bin& b : batches) {
      std::sort(b.items.begin(), b.items.end(), [](const Item& x, const Item& y) { return x.at < y.at; });
      for (const Item& item : b.items) {
        slab[k * w + r] = drawn[item.at];
        costs[k * w + r] = item.cost;
        ++k;
      }
    }
  }
}

StepCost step_cost(std::span<const std::uint64_t> costs, int world) {
  const auto w = static_cast<std::size_t>(world);
  std::vector<std::uint64_t> ranks(w, 0);
  for (std::size_t i = 0; i < costs.size(); ++i) ranks[i % w] += costs[i];
  const std::uint64_t total = std::accumulate(ranks.begin(), ranks.end(), std::uint64_t{0});
  return {*std::max_element(ranks.begin(), ranks.end()), static_cast<double>(total) / static_cast<double>(w)};
}

}  // namespace mmfeed::pipeline
