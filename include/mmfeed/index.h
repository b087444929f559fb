// A dataset index (the first part of opening at cluster scale): for each sample of a JSONL or
// JSON-array manifest, where its text lies in the file (a byte range) and what it names (its
// images, videos and audio clips), in fixed-width records behind a checksummed header bound to
// the file it was built from (its size, modification time and CRC-32). A stale index (the file
// changed since), a foreign one (another file's), a truncated or tampered one is refused by
// name, never used. Written by `mmfeed index SOURCE` beside the source (SOURCE.mmidx).
//
// The layout (little-endian; docs/data.md, "The dataset index"):
//   header, 64 bytes: magic "mmfeedIX", version (u32) 1, record size (u32) 32, samples (u64),
//     the source's size (u64), its mtime in ns (i64), its CRC-32 (u32), the records' CRC-32 (u32),
//     where its text starts (u32: 3 after a UTF-8 byte-order mark), flags (u32: bit 0 a JSON
//     array), 4 reserved bytes, the CRC-32 of the 60 bytes before (u32);
//   a record a sample, 32 bytes: its byte offset in the file (u64), its line number (JSONL,
//     1-based) or element index (array) (u64), its length (u32), its images, videos and audio
//     clips (u16 each), flags (u16: bit 0 its text is no conversation), 4 reserved bytes.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(IndexSummary s, build_index("train.jsonl", ""));   // train.jsonl.mmidx
//   MMFEED_ASSIGN_OR_RETURN(DatasetIndex index, open_index(s.path, "train.jsonl"));
//   index.records[7].offset;   // where sample 7's line begins in train.jsonl
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed {

inline constexpr std::uint32_t kIndexVersion = 1;

struct IndexRecord {
  std::uint64_t offset = 0;  // of the sample's text in the source file
  std::uint64_t number = 0;  // its line (1-based) or array element (0-based)
  std::uint32_t length = 0;  // bytes of its text
  std::uint16_t images = 0, videos = 0, audio = 0;
  bool bad = false;  // its text is no conversation (the Loader skips it and names it)
};

struct DatasetIndex {
  std::uint64_t source_size = 0;
  std::int64_t source_mtime_ns = 0;
  std::uint32_t source_crc32 = 0;  // of the text the Loader reads (after a byte-order mark)
  bool array = false;              // the source is one JSON array
  std::vector<IndexRecord> records;
};

struct IndexSummary {
  std::string path;  // the index written
  std::uint64_t samples = 0, images = 0, videos = 0, audio = 0;
  std::uint64_t text_bytes = 0;   // the samples' text, summed
  std::uint64_t index_bytes = 0;  // the index file's size
  std::vector<std::string> bad;   // "train.jsonl:12: reason", the samples that are no conversation
  std::uint64_t bad_count = 0;    // all of them (`bad` names the first 100)
};

// Indexes the local, uncompressed JSONL or JSON-array manifest `source` into `out` (empty:
// source + ".mmidx"), written whole to a temporary file and renamed into place, so a reader never
// meets half an index. A sample that is no conversation is indexed, flagged and named.
Result<IndexSummary> build_index(const std::string& source, const std::string& out);

// The index at `path`, checked whole against itself and against `source` (its size and mtime):
// an error naming the index and what is wrong otherwise (not an index, another version,
// truncated, its header or records altered, its source changed since it was built).
Result<DatasetIndex> open_index(const std::string& path, const std::string& source);

}  // namespace mmfeed
