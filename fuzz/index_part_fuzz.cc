// Fuzz target: a part of a manifest's index described apart (dataset/index_parts.h
// take_index_parts), its samples' bytes the input, behind a true header and CRC-32 (those the
// fuzzer would not guess). Invariants: whatever the bytes, a part taken holds exactly the text's
// lines (offsets, lengths, numbers) and each record's media lie within the media taken; nothing
// past the bytes is read; nothing aborts.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "dataset/index_parts.h"
#include "dataset/le_bytes.h"
#include "mmfeed/index.h"
#include "scratch_file.h"

namespace {

constexpr char kManifest[] =
    R"({"messages": [{"role": "user", "content": [{"type": "image", "image": "a.jpg"}, {"type": "text", "text": "Hi"}]}]})"
    "\n\n"
    R"({"messages": [{"role": "user", "content": "Two"}, {"role": "assistant", "content": "B."}]})"
    "\n"
    R"({"not": "a conversation"})"
    "\n";

struct Source {
  mmfeed::fuzz::ScratchFile file{".jsonl"};
  std::string path = file.write(reinterpret_cast<const std::uint8_t*>(kManifest), sizeof kManifest - 1);
  mmfeed::IndexOptions options = [] {
    mmfeed::IndexOptions o;
    o.probe_media = false;
    return o;
  }();
  std::string header = mmfeed::describe_index_part(path, {0, sizeof kManifest - 1}, options)
                           .value()
                           .substr(0, mmfeed::dataset::kIndexPartHead);
  mmfeed::dataset::SourceStamp stamp = mmfeed::dataset::stamp_source(path, {}).value();
  mmfeed::dataset::Manifests manifests = mmfeed::dataset::read_mapped_manifest(path, "m.jsonl").value();
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed;
  static const Source source;
  std::string part = source.header + std::string(reinterpret_cast<const char*>(data), size);
  dataset::put_le(part, dataset::crc32_of(part.data(), part.size()), 4);
  DatasetIndex index;
  index.records.assign(source.manifests.held.size(), {});
  dataset::ChunkCounts counts;
  if (!dataset::take_index_parts({part}, source.manifests, source.stamp, 0, source.options, index, counts).ok()) {
    return 0;
  }
  for (std::size_t i = 0; i < index.records.size(); ++i) {
    const IndexRecord& r = index.records[i];
    const dataset::ManifestLine& line = source.manifests.held[i];
    if (r.offset != line.offset || r.length != line.length || r.number != line.number) std::abort();
    if (r.first_media > index.media.size() || r.media() > index.media.size() - r.first_media) std::abort();
  }
  return 0;
}
