// Ranks balanced by cost (pipeline/balance.h): a step's samples are the drawn step's, each rank
// keeps its count, the largest rank's cost falls to within one sample of the mean, each rank's
// batches are balanced too, and the epoch's order is one pure function: the same however far each
// rank has walked, from a resume, and after a resharding (what the old world consumed as it
// balanced it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "dataset/manifest.h"
#include "mmfeed/index.h"
#include "pipeline/balance.h"
#include "pipeline/config.h"
#include "pipeline/order.h"

namespace mmfeed::pipeline {
namespace {

// Heavy-tailed costs, as images of mixed sizes and a few long videos give: sample i's is fixed.
std::uint64_t cost_of_sample(std::uint64_t i) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + 17;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  const std::uint64_t base = 100 + x % 900;
  return x % 16 == 0 ? base * 40 : base;  // one in 16 forty times as costly
}

std::vector<std::uint64_t> rank_costs(const std::vector<std::uint64_t>& slab, int world) {
  std::vector<std::uint64_t> ranks(static_cast<std::size_t>(world), 0);
  for (std::size_t i = 0; i < slab.size(); ++i) ranks[i % static_cast<std::size_t>(world)] += cost_of_sample(slab[i]);
  return ranks;
}

TEST(BalanceTest, AStepKeepsItsSamplesAndCountsAndItsLargestRankFalls) {
  for (const int world : {8, 64}) {
    for (const std::size_t n : {1u, 4u, 8u}) {
      std::vector<std::uint64_t> slab(static_cast<std::size_t>(world) * n);
      std::iota(slab.begin(), slab.end(), 1000);
      std::vector<std::uint64_t> costs(slab.size());
      std::transform(slab.begin(), slab.end(), costs.begin(), cost_of_sample);
      const std::vector<std::uint64_t> drawn = slab;
      balance_step(slab, costs, world, n);
      for (std::size_t i = 0; i < slab.size(); ++i) EXPECT_EQ(costs[i], cost_of_sample(slab[i]));
      std::vector<std::uint64_t> a = drawn, b = slab;
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      EXPECT_EQ(a, b) << "the step's samples are the drawn step's";
      const std::vector<std::uint64_t> before = rank_costs(drawn, world), after = rank_costs(slab, world);
      const std::uint64_t total = std::accumulate(after.begin(), after.end(), std::uint64_t{0});
      const std::uint64_t largest_sample = *std::max_element(costs.begin(), costs.end());
      const std::uint64_t max_after = *std::max_element(after.begin(), after.end());
      EXPECT_LE(max_after, *std::max_element(before.begin(), before.end()));
      // Largest-first: no rank above the mean by more than one sample (n = 1: the largest sample).
      EXPECT_LE(max_after, total / static_cast<std::uint64_t>(world) + largest_sample) << world << " x " << n;
      const StepCost planned = step_cost(costs, world);
      EXPECT_EQ(planned.max, max_after);
    }
  }
}

TEST(BalanceTest, FreeCountsKeepEverySampleOnceWithinTheBoundsAndNeverDoWorseThanEqualCounts) {
  for (const int world : {8, 64}) {
    for (const std::size_t n : {2u, 4u, 8u}) {
      const std::size_t least = 1, most = 2 * n;
      std::vector<std::uint64_t> slab(static_cast<std::size_t>(world) * n);
      std::iota(slab.begin(), slab.end(), 7000);
      std::vector<std::uint64_t> costs(slab.size());
      std::transform(slab.begin(), slab.end(), costs.begin(), cost_of_sample);
      const std::vector<std::vector<std::size_t>> ranks = free_split(costs, world, least, most);
      ASSERT_EQ(ranks.size(), static_cast<std::size_t>(world));
      std::vector<std::size_t> seen;
      std::uint64_t free_max = 0;
      for (const auto& rank : ranks) {
        EXPECT_GE(rank.size(), least);
        EXPECT_LE(rank.size(), most);
        std::uint64_t load = 0;
        for (const std::size_t i : rank) load += costs[i];
        free_max = std::max(free_max, load);
        seen.insert(seen.end(), rank.begin(), rank.end());
      }
      std::sort(seen.begin(), seen.end());
      std::vector<std::size_t> every(slab.size());
      std::iota(every.begin(), every.end(), 0);
      EXPECT_EQ(seen, every) << "every sample of the step once";
      std::vector<std::uint64_t> equal_slab = slab, equal_costs = costs;
      balance_step(equal_slab, equal_costs, world, n);
      EXPECT_LE(free_max, step_cost(equal_costs, world).max) << world << " x " << n;
      EXPECT_EQ(free_split(costs, world, least, most), ranks) << "a pure function of the costs";
    }
  }
  // At the bounds: each rank must take exactly its share (least = most = n), or at least one.
  const std::vector<std::uint64_t> few = {9000, 1, 1, 1, 1, 1};
  const auto pinned = free_split(few, 3, 2, 2);
  for (const auto& rank : pinned) EXPECT_EQ(rank.size(), 2u);
  const auto loose = free_split(few, 3, 1, 6);
  std::vector<std::size_t> sizes;
  for (const auto& rank : loose) sizes.push_back(rank.size());
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<std::size_t>{1, 2, 3})) << "the costly sample alone, the rest shared by the others";
}

TEST(BalanceTest, ARanksBatchesAreBalancedTooAndThePlanIsPure) {
  const int world = 4;
  const std::size_t batch = 2, batches = 3;  // gradient accumulation: 3 batches of 2 a step
  std::vector<std::uint64_t> slab(world * batch * batches);
  std::iota(slab.begin(), slab.end(), 40);
  std::vector<std::uint64_t> costs(slab.size());
  std::transform(slab.begin(), slab.end(), costs.begin(), cost_of_sample);
  std::vector<std::uint64_t> again = slab, again_costs = costs;
  balance_step(slab, costs, world, batch);
  balance_step(again, again_costs, world, batch);
  EXPECT_EQ(slab, again);
  for (int r = 0; r < world; ++r) {
    std::vector<std::uint64_t> loads;
    std::uint64_t largest = 0;
    for (std::size_t k = 0; k < batch * batches; k += batch) {
      std::uint64_t load = 0;
      for (std::size_t j = k; j < k + batch; ++j) {
        load += costs[j * world + static_cast<std::size_t>(r)];
        largest = std::max(largest, costs[j * world + static_cast<std::size_t>(r)]);
      }
      loads.push_back(load);
    }
    const std::uint64_t total = std::accumulate(loads.begin(), loads.end(), std::uint64_t{0});
    EXPECT_LE(*std::max_element(loads.begin(), loads.end()), total / batches + largest) << "rank " << r;
  }
  // A slab not a multiple of the world (a kept remainder) is left as drawn.
  std::vector<std::uint64_t> odd{1, 2, 3, 4, 5}, odd_costs{9, 1, 9, 1, 9};
  balance_step(odd, odd_costs, 2, 2);
  EXPECT_EQ(odd, (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
}

OrderOptions balanced(int rank, int world) {
  OrderOptions o;
  o.seed = 5;
  o.rank = rank;
  o.world_size = world;
  o.remainder = ShardRemainder::kPad;
  o.balance_batch = 2;
  o.balance_batches = 2;
  return o;
}

// A sample's cost under a model: cost_of_sample a unit of llm_token, another heavy-tailed draw a
// unit of vision_patch (so that two models plan a step differently).
std::uint64_t cost_under(std::uint64_t i, const CostModel& m) {
  return static_cast<std::uint64_t>(m.llm_token * static_cast<double>(cost_of_sample(i)) +
                                    m.vision_patch * static_cast<double>(cost_of_sample(i * 7 + 3)));
}

Population costed(std::uint64_t n) {
  Population p(n);
  p.cost = cost_under;
  p.model = CostModel{1, 0, 0, 0};
  return p;
}

constexpr std::array<double, 4> kOtherModel{0, 0, 1, 0};  // priced by the second draw alone

TEST(BalanceTest, AnEpochsStepsAreTheDrawnStepsSplitTheSameOnEveryRank) {
  const Population population = costed(101);
  const int world = 4;
  const std::size_t step = 4 * 2 * 2;
  std::vector<std::vector<std::uint64_t>> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(run_order(population, balanced(r, world), LoaderState{}, 0).all());
  const std::vector<std::uint64_t> drawn = rank_order(population, 5, 0, 0, world, true, ShardRemainder::kPad);
  ASSERT_EQ(ranks[0].size(), drawn.size());  // the counts of the unbalanced run
  std::vector<std::vector<std::uint64_t>> unbalanced;
  for (int r = 0; r < world; ++r)
    unbalanced.push_back(rank_order(population, 5, 0, r, world, true, ShardRemainder::kPad));
  double drawn_ratio = 0, planned_ratio = 0;
  for (std::size_t first = 0; first < drawn.size(); first += step / world) {
    std::vector<std::uint64_t> want, got;
    for (int r = 0; r < world; ++r) {
      for (std::size_t k = first; k < std::min(first + step / world, drawn.size()); ++k) {
        want.push_back(unbalanced[static_cast<std::size_t>(r)][k]);
        got.push_back(ranks[static_cast<std::size_t>(r)][k]);
      }
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "the step at " << first;
  }
  // The walk's own statistics: the planned split's largest rank below the drawn one's.
  EpochOrder order = run_order(population, balanced(0, world), LoaderState{}, 0);
  order.all();
  ASSERT_GT(order.stats().steps, 0u);
  drawn_ratio = order.stats().drawn / static_cast<double>(order.stats().steps);
  planned_ratio = order.stats().planned / static_cast<double>(order.stats().steps);
  EXPECT_LT(planned_ratio, drawn_ratio);
  // Walked lazily to a late position first, or from a resume's: the same samples.
  EpochOrder late = run_order(population, balanced(2, world), LoaderState{}, 0);
  EXPECT_EQ(late.at(20), ranks[2][20]);
  EXPECT_EQ(late.at(3), ranks[2][3]);
  LoaderState start;
  start.position = 12;
  EXPECT_EQ(run_order(population, balanced(1, world), start, 0).at(12), ranks[1][12]);
}

TEST(BalanceTest, AReshardedEpochLeavesWhatTheOldWorldConsumedAsItBalancedIt) {
  const Population population = costed(64);
  const int old_world = 4;
  LoaderState start;
  start.old_world_size = old_world;
  start.old_positions = {4, 4, 4, 4};  // a step of 4 ranks x 2 batches x 2 samples done
  std::vector<std::uint64_t> consumed;
  for (int r = 0; r < old_world; ++r) {
    const std::vector<std::uint64_t> old = run_order(population, balanced(r, old_world), LoaderState{}, 0).all();
    consumed.insert(consumed.end(), old.begin(), old.begin() + 4);
  }
  std::vector<std::uint64_t> rest;
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::uint64_t> mine = run_order(population, balanced(r, 2), start, 0).all();
    rest.insert(rest.end(), mine.begin(), mine.end());
  }
  std::vector<std::uint64_t> all = consumed;
  all.insert(all.end(), rest.begin(), rest.end());
  std::sort(all.begin(), all.end());
  std::vector<std::uint64_t> every(64);
  std::iota(every.begin(), every.end(), 0);
  EXPECT_EQ(all, every) << "every sample once: the old world's as it balanced them, the rest after";
}

// A recalibration (CostSwitch) at step k of an epoch: the steps before it are planned as without
// it, the steps from it (and every later epoch's) as a run priced by the new model throughout.
TEST(BalanceTest, ACostSwitchReplansTheStepsFromItsOwnOnly) {
  const Population population = costed(96);  // 6 steps of 4 ranks x 2 batches x 2
  const std::size_t step = 4 * 2 * 2;
  const auto dealt = [&](const std::vector<CostSwitch>& switches, int epoch) {
    LoaderState start;
    start.cost_switches = switches;
    return run_order(population, balanced(0, 4), start, epoch).dealt();
  };
  const std::vector<std::uint64_t> before = dealt({}, 0), after = dealt({{0, 0, kOtherModel}}, 0);
  const std::vector<std::uint64_t> switched = dealt({{0, 3, kOtherModel}}, 0);
  ASSERT_NE(before, after) << "the two models must plan differently for the test to say anything";
  EXPECT_TRUE(std::equal(before.begin(), before.begin() + 3 * step, switched.begin()));
  EXPECT_TRUE(std::equal(after.begin() + 3 * step, after.end(), switched.begin() + 3 * step));
  EXPECT_EQ(dealt({{0, 3, kOtherModel}}, 1), dealt({{0, 0, kOtherModel}}, 1)) << "a later epoch: the new model";
  EXPECT_EQ(dealt({{1, 0, kOtherModel}}, 0), before) << "a switch in a later epoch leaves this one";
  const CostModel base{1, 0, 0, 0};
  EXPECT_EQ(model_at(base, {{0, 3, kOtherModel}}, 0, 2).llm_token, 1);
  EXPECT_EQ(model_at(base, {{0, 3, kOtherModel}}, 0, 3).vision_patch, 1);
  EXPECT_EQ(model_at(base, {{0, 3, kOtherModel}, {2, 0, {5, 0, 0, 0}}}, 1, 0).vision_patch, 1);
  EXPECT_EQ(model_at(base, {{0, 3, kOtherModel}, {2, 0, {5, 0, 0, 0}}}, 2, 0).llm_token, 5);
}

// Resharding an epoch whose cost model was recalibrated: the old world's consumed samples are
// found in its order as it planned it (its switches), the new world plans the rest with the
// latest model, and every sample comes once. Without the old world's switches it would not.
TEST(BalanceTest, AReshardedEpochKeepsTheOldWorldsRecalibration) {
  const Population population = costed(96);
  const std::vector<CostSwitch> switches{{0, 1, kOtherModel}};
  std::vector<LoaderState> old;
  std::vector<std::uint64_t> consumed;
  for (int r = 0; r < 4; ++r) {
    LoaderState s;
    s.rank = r;
    s.world_size = 4;
    s.position = 6;  // a step under the run's model, and the first batch of one under the switch's
    s.cost_switches = switches;
    old.push_back(s);
    LoaderState start;
    start.cost_switches = switches;
    const std::vector<std::uint64_t> mine = run_order(population, balanced(r, 4), start, 0).all();
    consumed.insert(consumed.end(), mine.begin(), mine.begin() + 6);
  }
  const auto every_once = [&](bool keep_old_switches) {
    std::vector<std::uint64_t> all = consumed;
    for (int r = 0; r < 2; ++r) {
      Result<LoaderState> start = LoaderState::reshard(old, r, 2);
      EXPECT_TRUE(start.ok());
      EXPECT_EQ(start->old_cost_switches, switches);
      EXPECT_EQ(start->cost_switches, (std::vector<CostSwitch>{{0, 0, kOtherModel}}));
      if (!keep_old_switches) start->old_cost_switches.clear();
      const std::vector<std::uint64_t> mine = run_order(population, balanced(r, 2), *start, 0).all();
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::sort(all.begin(), all.end());
    return std::adjacent_find(all.begin(), all.end()) == all.end() && all.size() == 96;
  };
  EXPECT_TRUE(every_once(true));
  EXPECT_FALSE(every_once(false));
  old[2].cost_switches.clear();
  const Result<LoaderState> differing = LoaderState::reshard(old, 0, 2);
  ASSERT_FALSE(differing.ok());
  EXPECT_NE(differing.error().message().find("recalibrated"), std::string::npos) << differing.error().message();
}

// A state's switches survive its JSON; malformed ones are refused, naming the field; the first
// step a state has consumed nothing of is where a switch may go.
TEST(BalanceTest, CostSwitchesRoundTripAndTheOpenStepFollowsThePosition) {
  LoaderState s;
  s.cost_switches = {{0, 3, {1.5e10, 0.1, 0, 7}}, {2, 0, {1, 2, 3, 4}}};
  const Result<LoaderState> back = LoaderState::from_json(s.to_json());
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->cost_switches, s.cost_switches);
  for (const char* bad : {R"([[0,3,1,1,1,1],[0,2,1,1,1,1]])", R"([[0,3,1,1,1]])", R"([[0,3,1,1,1,-1]])",
                          R"([[0,3,1,1,1,1e16]])", R"([[-1,3,1,1,1,1]])", R"(7)"}) {
    const std::string json =
        R"({"seed":0,"rank":0,"world_size":1,"epoch":0,"position":0,"balance_switches":)" + std::string(bad) + "}";
    const Result<LoaderState> r = LoaderState::from_json(json);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("balance_switches"), std::string::npos) << r.error().message();
  }
  LoaderConfig c;
  c.batch_size = 2;
  c.gradient_accumulation_steps = 3;  // a step: 6 positions a rank
  LoaderState at;
  at.epoch = 1;
  for (const auto& [position, step] :
       std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 0}, {1, 1}, {6, 1}, {7, 2}, {12, 2}}) {
    at.position = position;
    EXPECT_EQ(at.open_step(c), (std::pair<int, std::uint64_t>{1, step})) << position;
  }
  c.token_budget = 64;
  c.pack_window = 8;  // packed: a step is a window
  at.position = 8;
  EXPECT_EQ(at.open_step(c).second, 1u);
  at.packed_delivered = 2;  // rows of the window at 8 delivered
  EXPECT_EQ(at.open_step(c).second, 2u);
}

// A dataset index's text tokens (`mmfeed index --tokenizer`) are a sample's text cost only for a
// Loader whose tokenizer and chat template counted them; another template's Loader costs the text
// by its length, as without them.
TEST(BalanceTest, IndexTextTokensAreTrustedOnlyWithTheTokenizerAndTemplateThatCountedThem) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mmfeed-balance-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string source = (dir / "text.jsonl").string();
  const std::string text = R"({"messages": [{"role": "user", "content": "How many tokens is this?"},)"
                           R"( {"role": "assistant", "content": "A few."}]})";
  std::ofstream(source) << text << "\n";
  LoaderConfig config;
  config.manifests = {source};
  config.tokenizer = MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json";
  config.balance = Balance::kTokens;
  const dataset::Manifests unindexed =
      dataset::read_manifests(config.manifests, dataset::kDefaultMaxManifestBytes, {}).value();
  IndexOptions options;
  options.tokenizer = config.tokenizer;
  const DatasetIndex index = open_index(build_index(source, options).value().path, source).value();
  ASSERT_GT(index.records[0].text_tokens, 0u);
  const dataset::Manifests m = dataset::read_manifests(config.manifests, dataset::kDefaultMaxManifestBytes, {}).value();
  const Settings same = check_config(config).value();
  EXPECT_EQ(trusted_text_tokens(same, m), std::vector<bool>{true});
  EXPECT_EQ(sample_shape(same, m, 0).tokens, index.records[0].text_tokens);
  EXPECT_EQ(trusted_text_tokens(same, unindexed), std::vector<bool>{false});
  EXPECT_EQ(sample_shape(same, unindexed, 0).tokens, text.size() / 4);  // its length stands for them
  config.chat_template = "qwen3-vl";
  const Settings other = check_config(config).value();
  EXPECT_EQ(trusted_text_tokens(other, m), std::vector<bool>{false});
  EXPECT_EQ(sample_shape(other, m, 0).tokens, text.size() / 4);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mmfeed::pipeline
