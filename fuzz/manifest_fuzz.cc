// Fuzz target: indexing a manifest's samples (JSONL lines, or the elements of one JSON array).
// Invariants: every sample lies inside the text, in order, without overlap, and is not blank;
// an array's elements each begin with a non-blank byte and end before the next one begins.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dataset/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::dataset;
  Manifest m;
  m.name = "fuzz.json";
  m.text.assign(reinterpret_cast<const char*>(data), size);
  std::vector<ManifestLine> lines;
  if (!index_samples(m, 0, lines).ok()) return 0;
  std::uint64_t end = 0;
  for (const ManifestLine& line : lines) {
    if (line.offset < end || line.offset + line.length > m.text.size() || line.length == 0) std::abort();
    const std::string_view sample = std::string_view(m.text).substr(line.offset, line.length);
    if (sample.find_first_not_of(" \t\r\n") == std::string_view::npos) std::abort();
    if (m.array && (sample.front() == ' ' || sample.back() == ' ' || sample.back() == '\n')) std::abort();
    end = line.offset + line.length;
  }
  return 0;
}
