// `mmfeed index` of file sets, each file given its own index (include/mmfeed/index.h's
// build_index dispatches here): WebDataset shards their .tar.idx (shards.h), Parquet files their
// FILE.mmidx (parquet_index.h), a wids descriptor's shards theirs (wids.h). Beside each local
// file, or in --out DIR (remote files': to upload beside them); a current one kept.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(IndexSummary s, index_parquet("train-{0..3}.parquet", files, {}, s3));
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dataset/wids.h"
#include "mmfeed/error.h"
#include "mmfeed/index.h"
#include "storage/credentials.h"

namespace mmfeed::dataset {

// Parquet files `files` (source `source`): an index beside each local one, or in options.out
// (a folder); one whose index is current is kept; one that cannot be indexed is named in the
// summary (`shards_damaged`, `bad`).
Result<IndexSummary> index_parquet(const std::string& source, const std::vector<std::string>& files,
                                   const IndexOptions& options, const storage::S3Options& s3);

// WebDataset shards `shards` (source `source`): the .tar.idx energon prepare writes, beside each
// local shard or in options.out (a folder); a damaged shard named and given none.
Result<IndexSummary> index_shards(const std::string& source, const std::vector<std::string>& shards,
                                  const IndexOptions& options, const storage::S3Options& s3);

// The local .json file at `path` (shown as `name`) as a wids descriptor, its shards resolved
// against its folder; nullopt where it is none.
Result<std::optional<WidsShards>> local_wids_descriptor(const std::string& path, const std::string& name);

}  // namespace mmfeed::dataset
