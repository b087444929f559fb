// Arrow IPC files as a source of samples: what `datasets.save_to_disk` writes
// (data-0000X-of-0000N.arrow, Arrow's streaming format) and Arrow's file format (.arrow with the
// ARROW1 magic), read from a local disk. Each file is memory-mapped and read record batch by
// record batch without copying; a row is a sample, written as one JSON line of the manifest text
// the way Parquet rows are (parquet.h): the columns as they are, an Image() column as references
// to the row's images ("images": ["images[0]"]). An image's bytes lie uncompressed in the file,
// so each becomes a member of its sample (ShardMember): a byte range of the file, fetched per
// sample as a tar shard's members are. A compressed record batch (whose bytes are not the file's)
// and a remote file are refused by name.
//
// Example:
//   std::vector<ManifestLine> lines;
//   MMFEED_ASSIGN_OR_RETURN(Manifest m, read_arrow_files("saved/", {"saved/data-00000-of-00001.arrow"},
//                                                        max_bytes, 0, lines));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dataset/manifest.h"
#include "mmfeed/error.h"

namespace mmfeed::dataset {

// Reads `files`, the Arrow files source `source` names, into one manifest, manifest number
// `manifest` (each row's line appended to `lines`). `limit` (max_manifest_bytes) bounds the text
// written and what Arrow allocates reading the files' record batches' metadata.
Result<Manifest> read_arrow_files(const std::string& source, const std::vector<std::string>& files, std::size_t limit,
                                  std::uint32_t manifest, std::vector<ManifestLine>& lines);

}  // namespace mmfeed::dataset
