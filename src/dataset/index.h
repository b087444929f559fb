// The dataset index as the manifest reader opens it (the format and its public face:
// include/mmfeed/index.h; built and read in index.cc).
//
// Example:
//   std::vector<ManifestLine> lines;
//   MMFEED_ASSIGN_OR_RETURN(IndexHeader h, read_index(index_path_of(path), path, [&](const IndexRecord& r) {
//     lines.push_back({r.offset - start, r.length, 0, r.number});
//   }));
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "mmfeed/error.h"
#include "mmfeed/index.h"

namespace mmfeed::dataset {

// Where a local manifest's index is looked for: beside it, "<file>.mmidx".
std::string index_path_of(const std::string& file_path);

struct IndexHeader {
  std::uint64_t samples = 0;
  std::uint64_t source_size = 0;
  std::int64_t source_mtime_ns = 0;
  std::uint32_t source_crc32 = 0;
  std::uint32_t text_start = 0;  // 3 after a UTF-8 byte-order mark
  bool array = false;
};

// The index at `path` of the local file `source`, read in pieces: its header checked (magic,
// version, CRC-32, the size it claims against the file's, `source`'s size and mtime), then each
// record checked to lie within `source` and handed to `sink` in order, then the records' CRC-32.
// On an error (naming `path`) what `sink` was given must be dropped.
Result<IndexHeader> read_index(const std::string& path, const std::string& source,
                               const std::function<void(const IndexRecord&)>& sink);

}  // namespace mmfeed::dataset
