// A remote manifest copied into a local file to index it (index.cc), or a byte range of a
// manifest read (a part of its index built apart, index_parts.cc): ranged GETs of kCopyPart
// bytes, several at once, each pinned by If-Match to the version stamped and written where it
// belongs. No copy of its text is held in memory, so no max_manifest_bytes bounds the build; the
// copy needs the manifest's size on the disk it is written to, and is deleted by the caller.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(SourceStamp stamp, stamp_source(source, s3));
//   MMFEED_RETURN_IF_ERROR(copy_remote(uri, "s3://b/train.jsonl", stamp, s3, "/cache/x.source"));
#pragma once

#include <cstdint>
#include <string>

#include "dataset/index.h"
#include "mmfeed/error.h"
#include "storage/credentials.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

inline constexpr std::uint64_t kCopyPart = std::uint64_t{16} << 20;  // bytes a GET
inline constexpr std::size_t kCopyInFlight = 8;                      // GETs at once: 128 MiB held at most

// The object at `uri` (shown as `name`), the version `stamp` names (its size and ETag), written
// whole into the file at `path` (created or truncated). An error names the object: unreachable, a
// part answered short, or replaced since it was stamped (kUnavailable).
Status copy_remote(const storage::ObjectUri& uri, const std::string& name, const SourceStamp& stamp,
                   const storage::S3Options& s3, const std::string& path);

// Bytes [begin, begin + length) of the object or file at `uri` (shown as `name`), of the version
// `stamp` names (a remote one's GET pinned to its ETag), read into memory by one read; `length` is
// the caller's to bound (> 0). An error names the object: unreachable, answered short, replaced.
Result<std::string> read_source_range(const storage::ObjectUri& uri, const std::string& name, const SourceStamp& stamp,
                                      const storage::S3Options& s3, std::uint64_t begin, std::uint64_t length);

}  // namespace mmfeed::dataset
