// The parts of a manifest's index described apart (include/mmfeed/index.h: plan_index_parts,
// describe_index_part) taken into the index build_index writes: each part checked against the
// text's own samples before its records are trusted.
//
// A part's bytes (little-endian): magic "mmfeedIP", version (u32) 1; what it is bound to: the
// source's size (u64), mtime in ns (i64; 0 remote), the CRC-32 of its ETag (u32; 0 local), where
// its text starts (u32), the text tokens' key (u32), media probed (u8), the CRC-32 of the media
// root (u32); the range of the text its samples' lines start in, line-aligned (two u64); its
// samples as a journal chunk holds them (index_journal.h: first sample 0, media from 0, line
// numbers counted from the range's first line); the CRC-32 of all before (u32).
//
// Example (build_index):
//   MMFEED_RETURN_IF_ERROR(take_index_parts(options.parts, manifests, stamp, start, options, index, counts));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dataset/index.h"
#include "dataset/index_journal.h"
#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "mmfeed/index.h"

namespace mmfeed::dataset {

inline constexpr std::size_t kIndexPartHead = 8 + 4 + 33 + 16;  // a part's bytes before its samples'

// `parts` (in order) as the records and media of `index` (its records sized for `manifests`' one
// manifest's held lines) and their counts into `counts`: each part's header, CRC and binding
// (`stamp`, `start`, the options' tokens key, media probing and root) checked, its range
// following the one before, its records exactly the lines that start in it (offsets and
// lengths), their numbers and named media renumbered from the text's; together the whole text.
// An error names the part ("index part 3 of 8") and what is wrong.
Status take_index_parts(const std::vector<std::string>& parts, const Manifests& manifests, const SourceStamp& stamp,
                        std::uint32_t start, const IndexOptions& options, DatasetIndex& index, ChunkCounts& counts);

}  // namespace mmfeed::dataset
