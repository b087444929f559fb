// Fuzz target: a Parquet source (dataset/parquet.h) read from the input written to a file, then
// every cell decoded from the range its sample would fetch. Invariants: no crash or hang (Arrow's
// exceptions become errors), every cell's range lies inside the file, every sample's line inside
// the text, and a cell decodes to bytes or a named error.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dataset/parquet.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::dataset;
  static const mmfeed::fuzz::ScratchFile file(".parquet");
  const std::string& path = file.write(data, size);
  std::vector<ManifestLine> lines;
  constexpr std::uint64_t kMaxBytes = 1 << 20;  // what a file may decode to: small, so inputs stay cheap
  auto m = read_parquet(path, {path}, kMaxBytes, mmfeed::storage::S3Options{}, 0, lines);
  if (!m.ok()) return 0;
  if (lines.size() != m->samples.size() || m->cells.size() != m->members.size()) std::abort();
  for (const ManifestLine& line : lines) {
    if (line.offset + line.length > m->text.size()) std::abort();
  }
  for (std::size_t k = 0; k < m->members.size(); ++k) {
    const ShardMember& member = m->members[k];
    if (member.offset > size || member.size > size - member.offset) std::abort();
    const CellPlace& place = m->cells[k];
    const ParquetCell cell{m->chunks.at(place.chunk), place.first_row, place.row, place.element};
    std::vector<std::byte> out;
    auto value = parquet_value(cell, std::as_bytes(std::span(data + member.offset, member.size)), kMaxBytes, out);
    if (value.ok() && value->offset + value->length > out.size()) std::abort();
  }
  return 0;
}
