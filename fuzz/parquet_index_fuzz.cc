// Fuzz target: a Parquet file's index (dataset/parquet_index.h read_parquet_index), taken as
// current for the file its header names (so the body is what is explored). Invariants: whatever
// the bytes say, nothing past them is read, what is held is bounded by them (the text by the
// limit), and every row and image it gives lies within its text and its file; nothing aborts.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "dataset/le_bytes.h"
#include "dataset/parquet_index.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::dataset;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  SourceStamp now;  // the file its header was built from, where it has one
  if (size >= 72) {
    now.size = get_le(bytes.data() + 48, 8);
    now.mtime_ns = static_cast<std::int64_t>(get_le(bytes.data() + 56, 8));
    now.etag_crc = static_cast<std::uint32_t>(get_le(bytes.data() + 64, 4));
  }
  Manifest rows;
  std::vector<ManifestLine> lines;
  constexpr std::size_t kLimit = 1 << 20;
  if (!read_parquet_index(bytes, "x.parquet.mmidx", now, kLimit, 0, rows, lines).ok()) return 0;
  if (rows.text.size() > kLimit || rows.text.size() > size) std::abort();
  if (lines.size() != rows.samples.size() || rows.members.size() != rows.cells.size()) std::abort();
  std::uint64_t members = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].offset + lines[i].length > rows.text.size() || lines[i].number != i) std::abort();
    if (rows.samples[i].first_member != members) std::abort();
    members += rows.samples[i].member_count;
  }
  if (members != rows.members.size()) std::abort();
  for (const CellPlace& c : rows.cells) {
    if (!c.value || c.value->offset + c.value->length > now.size) std::abort();
  }
  return 0;
}
