// Fuzz target: an Energon dataset's .nv-meta/split.yaml (dataset/shards.h parse_energon_split):
// the YAML, its train and exclude lists' brace patterns. Invariants: whatever the file says, the
// names made stay within the budgets (a 16 MiB file cannot expand past them), every shard is
// under the root, and nothing aborts.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dataset/shards.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::dataset;
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto split = parse_energon_split(yaml, "/ds", "split.yaml");
  if (!split.ok()) return 0;
  if (split->shards.empty() || split->shards.size() > kMaxShardsPerSource) std::abort();
  std::size_t bytes = 0;
  for (const auto& shard : split->shards) {
    if (!shard.starts_with("/ds/")) std::abort();
    bytes += shard.size();
  }
  if (bytes > kMaxShardNameBytes) std::abort();
  return 0;
}
