// The sample order (pipeline/order.h): shards, remainders, resharding, and blends.
#include "pipeline/order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace mmfeed {
namespace {

TEST(OrderTest, RanksAreDisjointAndComplete) {
  std::multiset<std::uint64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    for (std::uint64_t i : pipeline::rank_order(103, 7, 2, rank, 4, true)) seen.insert(i);
  }
  ASSERT_EQ(seen.size(), 103u);
  for (std::uint64_t i = 0; i < 103; ++i) EXPECT_EQ(seen.count(i), 1u);
}

// Issue 15: 24 samples over 5 ranks gave 5, 5, 5, 5, 4 samples (2, 2, 2, 2, 1 batches of 4),
// and a data-parallel job hung at the epoch's end.
TEST(OrderTest, PaddedShardsAreEqualAndRepeatTheFirstSamples) {
  const std::uint64_t n = 24;
  std::multiset<std::uint64_t> seen;
  for (int rank = 0; rank < 5; ++rank) {
    const auto mine = pipeline::rank_order(n, 7, 1, rank, 5, true, pipeline::ShardRemainder::kPad);
    EXPECT_EQ(mine.size(), 5u) << rank;
    seen.insert(mine.begin(), mine.end());
  }
  const auto perm = pipeline::epoch_permutation(n, 7, 1, true);
  for (std::uint64_t i = 0; i < n; ++i) {
    EXPECT_EQ(seen.count(i), i == perm[0] ? 2u : 1u) << i;  // one pad: the epoch's first sample
  }
}

TEST(OrderTest, DroppedShardsAreEqualAndLeaveOutTheLastSamples) {
  const std::uint64_t n = 24;
  std::multiset<std::uint64_t> seen;
  for (int rank = 0; rank < 5; ++rank) {
    const auto mine = pipeline::rank_order(n, 7, 1, rank, 5, true, pipeline::ShardRemainder::kDrop);
    EXPECT_EQ(mine.size(), 4u) << rank;
    seen.insert(mine.begin(), mine.end());
  }
  const auto perm = pipeline::epoch_permutation(n, 7, 1, true);
  for (std::uint64_t p = 0; p < n; ++p) EXPECT_EQ(seen.count(perm[p]), p < 20 ? 1u : 0u) << p;
}

TEST(OrderTest, FewerSamplesThanRanksStillGiveEveryRankOneWhenPadded) {
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(pipeline::rank_order(3, 1, 0, rank, 8, true, pipeline::ShardRemainder::kPad).size(), 1u);
    EXPECT_TRUE(pipeline::rank_order(3, 1, 0, rank, 8, true, pipeline::ShardRemainder::kDrop).empty());
  }
}

TEST(OrderTest, ReshardedPaddedShardsAreEqualAndCoverTheRest) {
  const std::uint64_t n = 101;  // padded to 102 over 3 old ranks of 34
  const std::vector<std::uint64_t> old_positions = {7, 3, 13};
  std::multiset<std::uint64_t> seen;
  for (int r = 0; r < 3; ++r) {
    const auto mine = pipeline::rank_order(n, 5, 1, r, 3, true, pipeline::ShardRemainder::kPad);
    for (std::uint64_t k = 0; k < old_positions[static_cast<std::size_t>(r)]; ++k) seen.insert(mine[k]);
  }
  std::vector<std::size_t> sizes;
  for (int r = 0; r < 4; ++r) {
    const auto mine =
        pipeline::resharded_order(n, 5, 1, true, 3, old_positions, {}, r, 4, pipeline::ShardRemainder::kPad);
    sizes.push_back(mine.size());
    seen.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(sizes, std::vector<std::size_t>(4, 20u));  // 102 - 23 consumed = 79 left, padded to 80
  for (std::uint64_t i = 0; i < n; ++i) EXPECT_GE(seen.count(i), 1u) << i;
  EXPECT_EQ(seen.size(), 23u + 80u);
}

TEST(OrderTest, PureFunctionOfItsInputs) {
  EXPECT_EQ(pipeline::epoch_permutation(50, 1, 0, true), pipeline::epoch_permutation(50, 1, 0, true));
  EXPECT_NE(pipeline::epoch_permutation(50, 1, 0, true), pipeline::epoch_permutation(50, 1, 1, true));
  EXPECT_NE(pipeline::epoch_permutation(50, 1, 0, true), pipeline::epoch_permutation(50, 2, 0, true));
  const auto plain = pipeline::epoch_permutation(5, 1, 0, false);
  EXPECT_EQ(plain, (std::vector<std::uint64_t>{0, 1, 2, 3, 4}));
}

TEST(OrderTest, ReshardedOrderCoversExactlyTheUnconsumedSamples) {
  const std::uint64_t n = 101;
  const std::vector<std::uint64_t> old_positions = {7, 3, 12};  // three old ranks, uneven progress
  std::multiset<std::uint64_t> seen;
  for (int r = 0; r < 3; ++r) {
    const auto mine = pipeline::rank_order(n, 5, 1, r, 3, true);
    for (std::uint64_t k = 0; k < old_positions[static_cast<std::size_t>(r)]; ++k) seen.insert(mine[k]);
  }
  for (int r = 0; r < 4; ++r) {
    for (std::uint64_t i : pipeline::resharded_order(n, 5, 1, true, 3, old_positions, {}, r, 4)) seen.insert(i);
  }
  ASSERT_EQ(seen.size(), n);
  for (std::uint64_t i = 0; i < n; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
}

TEST(OrderTest, ReshardedOrderSkipsSamplesDeliveredFromAPackingWindow) {
  const std::uint64_t n = 60;
  const std::vector<std::uint64_t> old_positions = {8, 4};  // window starts
  // Rank 0 delivered rows holding its positions 9 and 12 of the window at 8; rank 1 none.
  const std::vector<std::vector<std::uint64_t>> windows = {{9, 12}, {}};
  std::multiset<std::uint64_t> seen;
  for (int r = 0; r < 2; ++r) {
    const auto mine = pipeline::rank_order(n, 3, 0, r, 2, true);
    for (std::uint64_t k = 0; k < old_positions[static_cast<std::size_t>(r)]; ++k) seen.insert(mine[k]);
    for (std::uint64_t k : windows[static_cast<std::size_t>(r)]) seen.insert(mine[k]);
  }
  for (int r = 0; r < 3; ++r) {
    for (std::uint64_t i : pipeline::resharded_order(n, 3, 0, true, 2, old_positions, windows, r, 3)) seen.insert(i);
  }
  ASSERT_EQ(seen.size(), n);
  for (std::uint64_t i = 0; i < n; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
}

// A blend's draws from source s, in the order of `draws` (sample indices run through the
// sources: source 0's first, then source 1's).
std::map<std::uint32_t, std::vector<std::uint64_t>> by_source(const pipeline::Population& p,
                                                              const std::vector<std::uint64_t>& draws) {
  std::map<std::uint32_t, std::vector<std::uint64_t>> out;
  for (const std::uint64_t i : draws) {
    std::uint64_t first = 0;
    std::uint32_t s = 0;
    while (i >= first + p.sizes[s]) first += p.sizes[s++];
    out[s].push_back(i - first);
  }
  return out;
}

TEST(BlendTest, SharesAreTheQuotasRoundedByRunningSums) {
  EXPECT_EQ(pipeline::Population({600, 400}, {0.25, 0.75}, 0).shares(), (std::vector<std::uint64_t>{250, 750}));
  // 100 / 3 each: running sums 33.3, 66.7, 100 round to 33, 67, 100.
  EXPECT_EQ(pipeline::Population({5, 5, 5}, {1, 1, 1}, 100).shares(), (std::vector<std::uint64_t>{33, 34, 33}));
  EXPECT_EQ(pipeline::Population({5, 5, 5}, {1, 0, 2}, 10).shares(), (std::vector<std::uint64_t>{3, 0, 7}));
  // A source of weight 0 (it may hold no sample) never draws, however the others' sums round.
  for (const std::uint64_t draws : {10ull, 999'999'999'989ull}) {
    EXPECT_EQ(pipeline::Population({5, 5, 5, 0}, {0.1, 0.2, 0.7, 0}, draws).shares()[3], 0u) << draws;
    EXPECT_EQ(pipeline::Population({0, 5}, {0, 1}, draws).shares(), (std::vector<std::uint64_t>{0, draws}));
  }
  // Awkward weights: every share within one of its quota, and the shares add up to the draws.
  const std::vector<double> weights = {0.1, 1e-9, 3.7, 2.2, 0.0001, 1.0 / 3.0};
  for (const std::uint64_t draws : {1ull, 7ull, 1000ull, 999'983ull}) {
    const pipeline::Population p(std::vector<std::uint64_t>(weights.size(), 10), weights, draws);
    const std::vector<std::uint64_t> shares = p.shares();
    double sum = 0;
    for (const double w : weights) sum += w;
    std::uint64_t total = 0;
    for (std::size_t s = 0; s < shares.size(); ++s) {
      EXPECT_LE(std::fabs(static_cast<double>(shares[s]) - static_cast<double>(draws) * weights[s] / sum), 1.0)
          << draws << " draws, source " << s;
      total += shares[s];
    }
    EXPECT_EQ(total, draws);
  }
}

TEST(BlendTest, AnEpochDrawsEachSourcesShareAndTheOrderIsAPureFunctionOfTheSeed) {
  const pipeline::Population p({1000, 50, 200}, {0.5, 0.3, 0.2}, 2000);
  const std::vector<std::uint64_t> epoch = pipeline::epoch_permutation(p, 7, 0, true);
  ASSERT_EQ(epoch.size(), 2000u);
  const auto drawn = by_source(p, epoch);
  EXPECT_EQ(drawn.at(0).size(), 1000u);
  EXPECT_EQ(drawn.at(1).size(), 600u);  // 50 samples, 12 passes
  EXPECT_EQ(drawn.at(2).size(), 400u);
  EXPECT_EQ(epoch, pipeline::epoch_permutation(p, 7, 0, true));
  EXPECT_NE(epoch, pipeline::epoch_permutation(p, 8, 0, true));
  EXPECT_NE(epoch, pipeline::epoch_permutation(p, 7, 1, true));
  // Shuffled: source 1's 600 draws spread over the epoch. The first half holds a hypergeometric
  // count (mean 300, sd 11.2); this seed's is fixed, the bound (6 sd) says the shuffle mixes.
  const auto first_half = by_source(p, std::vector<std::uint64_t>(epoch.begin(), epoch.begin() + 1000));
  EXPECT_NEAR(static_cast<double>(first_half.at(1).size()), 300.0, 67.0);
}

TEST(BlendTest, NoSampleOfASourceTwiceBeforeEveryOneOfItOnceAcrossEpochs) {
  const pipeline::Population p({10, 3, 7}, {1, 3, 0.5}, 45);
  for (const bool shuffle : {true, false}) {
    std::vector<std::uint64_t> run;
    for (int epoch = 0; epoch < 6; ++epoch) {
      const std::vector<std::uint64_t> e = pipeline::epoch_permutation(p, 11, epoch, shuffle);
      run.insert(run.end(), e.begin(), e.end());
    }
    for (const auto& [s, draws] : by_source(p, run)) {
      const std::uint64_t n = p.sizes[s];
      for (std::size_t pass = 0; (pass + 1) * n <= draws.size(); ++pass) {
        const std::set<std::uint64_t> seen(draws.begin() + static_cast<std::ptrdiff_t>(pass * n),
                                           draws.begin() + static_cast<std::ptrdiff_t>((pass + 1) * n));
        EXPECT_EQ(seen.size(), n) << "source " << s << ", pass " << pass << (shuffle ? "" : ", not shuffled");
      }
    }
  }
}

TEST(BlendTest, WithoutShuffleTheSourcesAreSpreadEvenlyAndEachCyclesInOrder) {
  const pipeline::Population p({4, 6, 9}, {2, 5, 3}, 100);
  const std::vector<std::uint64_t> shares = p.shares();
  const std::vector<std::uint64_t> epoch = pipeline::epoch_permutation(p, 3, 0, false);
  std::vector<std::uint64_t> counts(3, 0);
  for (std::size_t t = 0; t < epoch.size(); ++t) {
    ++counts[by_source(p, {epoch[t]}).begin()->first];
    for (std::size_t s = 0; s < 3; ++s) {  // every prefix holds each source's share of it, within one
      const double due = static_cast<double>(shares[s]) * static_cast<double>(t + 1) / 100.0;
      EXPECT_LE(std::fabs(static_cast<double>(counts[s]) - due), 1.0) << "prefix " << t + 1 << ", source " << s;
    }
  }
  const auto drawn = by_source(p, epoch);
  for (std::size_t k = 0; k < drawn.at(1).size(); ++k) EXPECT_EQ(drawn.at(1)[k], k % 6);
}

TEST(BlendTest, RanksAndReshardingWorkOnABlendsEpoch) {
  const pipeline::Population p({30, 11}, {1, 1}, 101);
  const std::vector<std::uint64_t> epoch = pipeline::epoch_permutation(p, 5, 2, true);
  std::multiset<std::uint64_t> ranks;
  std::vector<std::uint64_t> old_positions;
  for (int r = 0; r < 3; ++r) {
    const auto mine = pipeline::rank_order(p, 5, 2, r, 3, true);
    ranks.insert(mine.begin(), mine.end());
    old_positions.push_back(mine.size() / 2);
  }
  EXPECT_EQ(ranks, std::multiset<std::uint64_t>(epoch.begin(), epoch.end()));
  EXPECT_EQ(pipeline::rank_epoch_size(p.epoch_length(), 1, 3), pipeline::rank_order(p, 5, 2, 1, 3, true).size());
  // Resharded from 3 ranks half-way to 4: the new ranks take what the old had not.
  std::multiset<std::uint64_t> rest(epoch.begin(), epoch.end());
  for (int r = 0; r < 3; ++r) {
    const auto mine = pipeline::rank_order(p, 5, 2, r, 3, true);
    for (std::size_t k = 0; k < old_positions[static_cast<std::size_t>(r)]; ++k) rest.erase(rest.find(mine[k]));
  }
  std::multiset<std::uint64_t> resharded;
  for (int r = 0; r < 4; ++r) {
    const auto mine = pipeline::resharded_order(p, 5, 2, true, 3, old_positions, {}, r, 4);
    resharded.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(resharded, rest);
}

TEST(BlendTest, AWeightedManifestWithoutSamplesIsRefusedByName) {
  dataset::Manifests m;
  m.files.resize(2);
  m.files[0].name = "a.jsonl";
  m.files[1].name = "empty.jsonl";
  m.held.push_back({0, 2, 0, 1});
  m.files[0].line_count = 1;
  m.files[1].first_line = 1;
  LoaderConfig config;
  config.manifests = {"a.jsonl", "empty.jsonl"};
  config.weights = {1, 0.5};
  const auto refused = pipeline::population_of(config, m);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("empty.jsonl holds no sample"), std::string::npos)
      << refused.error().message();
  config.weights = {1, 0};
  const auto zero = pipeline::population_of(config, m);
  ASSERT_TRUE(zero.ok()) << zero.error().to_string();
  EXPECT_EQ(zero->epoch_length(), 1u);
  config.weights = {};
  ASSERT_TRUE(pipeline::population_of(config, m).ok());
  EXPECT_FALSE(pipeline::population_of(config, m)->blend());
}

}  // namespace
}  // namespace mmfeed
