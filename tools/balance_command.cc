// mmfeed balance-report: for a data set, a world size and a step's samples, the largest rank's
// cost against the mean at every step, as drawn and as balance= splits it (include/mmfeed/balance.h).
// Exit status 1 when the data set cannot be read, 2 on bad usage.
#include <algorithm>
#include <cstdio>
#include <string>

#include "mmfeed/balance.h"
#include "mmfeed/json.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"

namespace mmfeed::tools {

namespace {

constexpr const char* kBalanceUsage =
    "usage: mmfeed balance-report [--json] [loader options] MANIFEST...\n"
    "\n"
    "For the run the loader options describe (world_size, batch_size, gradient_accumulation_steps,\n"
    "balance: compute unless given, balance_cost, the model and its pixel bounds), prints each step's\n"
    "largest rank cost over the mean as drawn and as balanced, and what planning costs (packed,\n"
    "token_budget > 0: each rank's windows packed into rows by their samples' estimated tokens, a\n"
    "step gradient_accumulation_steps rows a rank). Media costs\n"
    "come from the data set's index (mmfeed index); without one, at a nominal size.\n"
    "\n"
    "options:\n"
    "  --json   one JSON object: the summary and each step's drawn_max, drawn_mean, planned_max and\n"
    "           planned_mean (mean_free: padded, what per-rank counts that differ would give)\n";

double worst(const BalanceReport& r, bool planned) {
  double w = 1;
  for (const BalanceStep& s : r.steps) {
    const double mean = planned ? s.planned_mean : s.drawn_mean;
    if (mean > 0) w = std::max(w, static_cast<double>(planned ? s.planned_max : s.drawn_max) / mean);
  }
  return w;
}

void print_json(const BalanceReport& r, const LoaderConfig& c) {
  std::string out =
      "{\"world_size\":" + std::to_string(c.world_size) + ",\"batch_size\":" + std::to_string(c.batch_size) +
      ",\"gradient_accumulation_steps\":" + std::to_string(c.gradient_accumulation_steps) +
      ",\"samples\":" + std::to_string(r.samples) + ",\"media\":" + std::to_string(r.media) +
      ",\"media_nominal\":" + std::to_string(r.media_nominal) + ",\"mean_drawn\":" + std::to_string(r.mean_drawn()) +
      ",\"mean_planned\":" + std::to_string(r.mean_planned()) + ",\"mean_free\":" + std::to_string(r.mean_free()) +
      ",\"worst_drawn\":" + std::to_string(worst(r, false)) + ",\"worst_planned\":" + std::to_string(worst(r, true)) +
      ",\"cost_seconds\":" + std::to_string(r.cost_seconds) + ",\"plan_seconds\":" + std::to_string(r.plan_seconds) +
      ",\"steps\":[";
  for (std::size_t i = 0; i < r.steps.size(); ++i) {
    const BalanceStep& s = r.steps[i];
    out += (i ? "," : "") + std::string("[") + std::to_string(s.drawn_max) + "," + std::to_string(s.drawn_mean) + "," +
           std::to_string(s.planned_max) + "," + std::to_string(s.planned_mean) + "]";
  }
  out += "]}";
  std::puts(out.c_str());
}

void print_text(const BalanceReport& r, const LoaderConfig& c) {
  const double steps = static_cast<double>(std::max<std::size_t>(r.steps.size(), 1));
  const std::string a_rank =
      c.token_budget > 0
          ? std::to_string(c.gradient_accumulation_steps) + " rows of " + std::to_string(c.token_budget) + " tokens"
          : std::to_string(c.batch_size * c.gradient_accumulation_steps) + " samples";
  std::printf("%llu samples in %zu steps of %d ranks x %s (%s; %llu of %llu media at a nominal size)\n",
              static_cast<unsigned long long>(r.samples), r.steps.size(), c.world_size, a_rank.c_str(),
              c.balance == Balance::kTokens ? "balanced by tokens" : "balanced by compute",
              static_cast<unsigned long long>(r.media_nominal), static_cast<unsigned long long>(r.media));
  std::printf("  largest rank / mean:  drawn %.3f (worst step %.3f)   balanced %.3f (worst step %.3f)\n",
              r.mean_drawn(), worst(r, false), r.mean_planned(), worst(r, true));
  std::printf("  GPU time lost waiting for the largest rank:  drawn %.1f%%   balanced %.1f%%\n",
              100 * (1 - 1 / r.mean_drawn()), 100 * (1 - 1 / r.mean_planned()));
  if (r.mean_free() > 0) {
    std::printf("  were each rank's count free (a batch of 1 to %zu samples; the Loader keeps them equal): %.3f\n",
                2 * c.batch_size, r.mean_free());
  }
  std::printf("  a step's plan: %.3f ms (its samples' costs %.3f ms), one core\n", 1e3 * r.plan_seconds / steps,
              1e3 * r.cost_seconds / steps);
}

}  // namespace

int run_balance_report(int argc, char** argv) {
  LoaderConfig config;
  bool json = false;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kBalanceUsage, stdout);
      return 0;
    }
    if (arg == "--json") {
      json = true;
    } else if (auto applied = apply_loader_flag(config, argc, argv, i)) {
      if (!applied->ok()) {
        std::fprintf(stderr, "mmfeed balance-report: %s\n", applied->error().to_string().c_str());
        return 2;
      }
    } else if (arg.starts_with("--")) {
      std::fprintf(stderr, "mmfeed balance-report: unknown option %s\n%s", arg.c_str(), kBalanceUsage);
      return 2;
    } else {
      config.manifests.push_back(arg);
    }
  }
  if (config.manifests.empty()) {
    std::fputs(kBalanceUsage, stderr);
    return 2;
  }
  auto report = balance_report(config);
  if (!report.ok()) {
    std::fprintf(stderr, "mmfeed balance-report: %s\n", report.error().to_string().c_str());
    return 1;
  }
  if (config.balance == Balance::kNone) config.balance = Balance::kCompute;
  if (json) {
    print_json(*report, config);
  } else {
    print_text(*report, config);
  }
  return 0;
}

}  // namespace mmfeed::tools
