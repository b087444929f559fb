// What a source names, resolved into its files and their layout, before any is read: one file,
// a brace pattern ("shard-{000..127}.tar"), a glob ("data/train-*.parquet", "s3://b/d/*.jsonl"),
// or a folder, as Hugging Face datasets lay them out:
//   - a hub dataset's folder: data files of one layout (Parquet, tar shards, JSONL/JSON, Arrow),
//     found recursively (hidden entries and README/metadata files skipped), in path order;
//   - `datasets.save_to_disk`'s folder: state.json listing its Arrow IPC files
//     (data-0000X-of-0000N.arrow), read in its order;
//   - an Energon dataset (.nv-meta/split.yaml).
// A glob's `*` and `?` match within one path component. Local folders and globs are listed from
// the file system, s3:// ones with ListObjectsV2 (a prefix ending in '/' is a folder; one holding
// .nv-meta/split.yaml an Energon dataset); http(s) has no listing: a glob there is refused by
// name, and a prefix ending in '/' is an Energon dataset. A folder or glob whose files are of
// several layouts, or of none mmfeed reads, is refused naming what it holds.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(SourceFiles f, source_files("ov/data", s3));
//   // f.layout: kParquet; f.files: ov/data/train-00000-of-00002.parquet, ...-00001-of-00002.parquet
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"
#include "storage/credentials.h"

namespace mmfeed::dataset {

enum class Layout { kManifest, kShards, kParquet, kArrow, kEnergon };

struct SourceFiles {
  Layout layout = Layout::kManifest;
  std::vector<std::string> files;  // kEnergon: the dataset's folder
};

// The layout a file's name says: .parquet, .tar, .arrow, else a JSONL or JSON manifest.
Layout layout_of(std::string_view name);

// True when `path` holds a glob's wildcard: '*' or '?' (in an http(s) URL, a '*' before its query).
bool has_wildcard(std::string_view path);

// Whether `name` matches the glob `pattern` ('*': any run of characters but '/', '?': one).
bool glob_match(std::string_view pattern, std::string_view name);

// The files `source` names and their layout; at most kMaxShardsPerSource files.
Result<SourceFiles> source_files(const std::string& source, const storage::S3Options& s3);

}  // namespace mmfeed::dataset
