// Fuzz target: scanning a tar shard (dataset/shards.h) from the input written to a file.
// Invariants: the scan ends (a loop asks for the same bytes forever and times out), every member
// lies inside the shard, every sample's line inside the text, and a failed sample's line is empty.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dataset/shards.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::dataset;
  static const mmfeed::fuzz::ScratchFile file(".tar");
  const std::string& path = file.write(data, size);
  std::vector<ManifestLine> lines;
  auto m = read_shards(path, {path}, 1 << 16, mmfeed::storage::S3Options{}, 0, lines);
  if (!m.ok()) return 0;
  if (lines.size() != m->samples.size()) std::abort();
  for (const ShardMember& member : m->members) {
    if (member.offset > size || member.size > size - member.offset) {
      // Only a sample failed by the shard's end may name bytes past it.
      bool failed = false;
      for (const ShardSample& s : m->samples) failed = failed || s.error.has_value();
      if (!failed) std::abort();
    }
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].offset + lines[i].length > m->text.size()) std::abort();
    if (m->samples[i].error && lines[i].length != 0) std::abort();
  }
  return 0;
}
