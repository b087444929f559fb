// Ranks balanced by compute (LoaderConfig::balance): each optimizer step's samples, drawn as
// without balancing (world_size x gradient_accumulation_steps x batch_size of the epoch's
// permutation), are split across the ranks, and each rank's across its batches, so that every
// rank keeps its count and the largest rank's cost is least. Every rank computes the same plan
// on its own, from the samples' costs alone: a pure function of (the step's samples, their
// costs, world size), so resume and resharding stay exact and no rank talks to another.
//
// A sample's cost comes from its facts: with the dataset index (include/mmfeed/index.h) its
// media's sizes read from their headers and its text's length; without one, its text parsed
// (media at a nominal 512 x 512 pixels, a video at 8 s of 640 x 360 at 30 fps). kTokens counts
// the sample's LLM tokens; kCompute its forward FLOPs: per LLM token and token pair (the model's
// linear layers and attention), per vision patch and patch pair within each image or frame group
// (the ViT's), Qwen2-VL-7B's shape unless balance_cost gives its own.
//
// Example:
//   population.cost = sample_costs(settings, manifests, owner);        // (index, model) -> cost
//   for (std::size_t i = 0; i < slab.size(); ++i) costs[i] = population.cost(slab[i], model);
//   balance_step(slab, costs, world, batch_size);                      // both rearranged in place
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dataset/manifest.h"
#include "pipeline/config.h"

namespace mmfeed::pipeline {

// LoaderConfig::balance_cost's, else kCompute's default (Qwen2-VL-7B: LLM 7.6e9 parameters, 28
// layers of width 3584; ViT 6.75e8 parameters, 32 layers of width 1280), else (kTokens) one per
// LLM token.
CostModel cost_model(const LoaderConfig& config);

// What cost a sample's facts come to: its LLM tokens (text and media) and each image's or frame
// group's vision patches.
struct SampleShape {
  std::uint64_t tokens = 0;
  std::vector<std::uint64_t> patches;    // per image, per video frame group
  std::uint32_t media = 0, nominal = 0;  // its media, and those at a nominal size (no facts)
};
std::uint64_t cost_of(const SampleShape& shape, const CostModel& model);

// The cost of each sample of `manifests` under `settings` (its model's resize rules and bounds,
// the per-manifest max_pixels) as a CostFn (order.h), from the index where a manifest has one, else from its text;
// `owner` keeps the manifests alive as long as the function. A sample whose text cannot be read
// or parsed costs nothing (it fails where it is processed, as without balancing).
CostFn sample_costs(const Settings& settings, const dataset::Manifests& manifests, std::shared_ptr<const void> owner);

// Per manifest: whether its dataset index's text tokens were counted with this run's tokenizer and
// the manifest's chat template (their text_tokens_key() alike): only then are they its samples'
// text cost (else their length stands for them). The tokenizer file is read (once a template)
// only where an index holds text tokens.
std::vector<bool> trusted_text_tokens(const Settings& settings, const dataset::Manifests& manifests);

// The shape sample_costs() gives sample `index` (for `mmfeed balance-report` and tests).
SampleShape sample_shape(const Settings& settings, const dataset::Manifests& manifests, std::uint64_t index);

// Rearranges one step's samples, `slab` (world x n entries, rank r's k-th at k x world + r, as the
// epoch is dealt), and their `costs` alike, so that each rank keeps n, the largest rank's cost is
// least (largest first to the least loaded rank with room, then swaps that lower the largest),
// and each rank's n are split into batches of `batch` (the last may be short) the same way. A
// slab not a multiple of world long (the last of an epoch whose remainder is kept) is left as it
// is. Ties go by position, so the plan is the same on every rank.
void balance_step(std::span<std::uint64_t> slab, std::span<std::uint64_t> costs, int world, std::size_t batch);

// Per-rank sample counts that differ (what `mmfeed balance-report` shows beside the equal
// counts the Loader keeps): one step's `costs` split across `world` ranks of `least` to `most`
// samples each (world x least <= costs <= world x most), the largest rank's cost least: each
// rank's samples, by their place in `costs`.
std::vector<std::vector<std::size_t>> free_split(std::span<const std::uint64_t> costs, int world, std::size_t least,
                                                 std::size_t most);

// The largest and the mean rank cost of a dealt slab's `costs` (its planned or drawn split).
struct StepCost {
  std::uint64_t max = 0;
  double mean = 0;
};
StepCost step_cost(std::span<const std::uint64_t> costs, int world);

}  // namespace mmfeed::pipeline
