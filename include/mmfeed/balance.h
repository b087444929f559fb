// What balancing the ranks by cost gives a data set (LoaderConfig::balance; docs/loading.md,
// "Ranks balanced by compute"): for every step of the run, the largest rank's forward FLOPs (the
// kCompute cost model, balance_cost's when given) against the mean, as drawn and as the plan
// (by balance's own cost: tokens or FLOPs) splits it, and what planning costs. `mmfeed balance-report` and
// mmfeed.balance_report print it; bench/balance.py runs it over worlds and step sizes.
//
// Example:
//   LoaderConfig c;
//   c.manifests = {"train.jsonl"};
//   c.world_size = 64;
//   c.balance = Balance::kCompute;
//   MMFEED_ASSIGN_OR_RETURN(BalanceReport r, balance_report(c));
//   r.mean_drawn();    // 1.66: the largest rank's cost over the mean, as drawn
//   r.mean_planned();  // 1.02: as balanced
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "mmfeed/error.h"
#include "mmfeed/loader.h"

namespace mmfeed {

struct BalanceStep {              // in millions of FLOPs
  std::uint64_t drawn_max = 0;    // the largest rank's as drawn
  double drawn_mean = 0;          // the ranks' mean
  std::uint64_t planned_max = 0;  // as the plan splits the step
  double planned_mean = 0;        // (the drawn mean, padded; packed, the rows of a step differ)
  std::uint64_t free_max = 0;     // padded: the largest rank's were each rank's count free (a
                                  // batch of 1 to 2 x batch_size samples), planned by the same
                                  // cost; 0 packed (rows are free already)
};

struct BalanceReport {
  std::vector<BalanceStep> steps;   // every whole step of the run's epochs: world_size x batch_size x
                                    // gradient_accumulation_steps samples; packed (token_budget > 0),
                                    // gradient_accumulation_steps rows a rank, each rank's windows
                                    // packed by their samples' estimated tokens as the Loader packs
  std::uint64_t samples = 0;        // in those steps
  std::uint64_t media = 0;          // their media
  std::uint64_t media_nominal = 0;  // of them, costed at a nominal size (no header read: no index)
  double cost_seconds = 0;          // the samples' costs (balance's), evaluated on this thread
  double plan_seconds = 0;          // the steps' plans given the costs, on this thread

  double mean_drawn() const;    // the steps' mean of max / mean, as drawn
  double mean_planned() const;  // as planned
  double mean_free() const;     // padded, with per-rank counts free (free_max); 0 packed
};

// The four coefficients config.balance plans with, in balance_cost's order: balance_cost's when
// given, else kCompute's default model (Qwen2-VL-7B's forward FLOPs); kTokens: one a token.
std::array<double, 4> planned_cost(const LoaderConfig& config);

// The report for `config`'s run (its manifests read as a Loader reads them: from their index
// when they have one), balanced as config.balance says (kNone: as kCompute would); this rank's
// view is every rank's, so rank does not matter.
Result<BalanceReport> balance_report(const LoaderConfig& config);

}  // namespace mmfeed
