// Fuzz target: a wids dataset descriptor (dataset/wids.h parse_wids_descriptor). Invariants:
// whatever the text says, a descriptor read names at least one shard, each a .tar with its
// count, resolved under the descriptor's folder when relative; nothing aborts.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dataset/wids.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::dataset;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto wids = parse_wids_descriptor(text, "d.json", "/ds");
  if (!wids.ok() || !*wids) return 0;
  const WidsShards& w = **wids;
  if (w.urls.empty() || w.urls.size() != w.nsamples.size()) std::abort();
  for (const auto& url : w.urls) {
    const std::string_view plain = std::string_view(url).substr(0, url.find_first_of("?#"));
    if (!plain.ends_with(".tar")) std::abort();
  }
  return 0;
}
