// WebDataset tar shards as a source of samples: a sample is the run of consecutive members
// sharing a key (the member's path up to the first '.' of its file name: "d/a1.0.jpg" is key
// "d/a1", suffix "0.jpg"); its ".json" member holds the conversation, in any shape the manifests
// take, and its media references name the sample's members by suffix ("images": ["0.jpg"] ->
// the member "<key>.0.jpg"). A source is one shard or a brace pattern of them
// ("s3://b/train/shard-{000..127}.tar", "{a,b}.tar"), local, s3:// or http(s)://.
//
// Indexing reads the shards' headers, not their media: windows of kScanWindow bytes from each
// header (ranged reads for remote shards, many shards at once), jumping over members that do not
// fit, and reading the .json members whole. Media are then fetched as byte ranges of their shard,
// so the order, sharding, resume and resharding work as for a JSONL manifest. Every size is
// checked before memory is committed: a .json member larger than the manifest budget, a header
// whose size runs past the shard's end (the read starting one byte before the next header finds
// the end), a malformed header (checksum, size field) are errors naming the shard and the byte.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(std::vector<std::string> shards, expand_braces("data/shard-{00..03}.tar"));
//   // shards: data/shard-00.tar, data/shard-01.tar, data/shard-02.tar, data/shard-03.tar
//   std::vector<ManifestLine> lines;
//   MMFEED_ASSIGN_OR_RETURN(Manifest m, read_shards("data/shard-{00..03}.tar", max_bytes, s3, 0, lines));
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "dataset/brace_pattern.h"
#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "storage/credentials.h"

namespace mmfeed::dataset {

inline constexpr std::uint64_t kScanWindow = 1 << 20;  // bytes read from a header on

// One tar header, decoded.
struct TarHeader {
  std::string name;
  std::uint64_t size = 0;
  char type = '0';
};

// Decodes a 512-byte ustar/GNU/v7 header: its checksum checked, the size octal or base-256,
// the ustar prefix joined to the name. nullopt for an all-zero block (the archive's end).
Result<std::optional<TarHeader>> parse_tar_header(std::span<const std::byte> block);

// A WebDataset member name split into its sample key and suffix; nullopt for a name whose
// file name has no '.' (not part of any sample).
std::optional<std::pair<std::string_view, std::string_view>> split_member_name(std::string_view name);

// Reads `shards`, the files source `source` names (source_files.h), into one manifest, manifest
// number `manifest`: shards that each carry a .tar.idx (beside a local one, current; beside a
// remote one) opened from those as read_energon_dataset opens them; else, local shards with a
// node cache (`cache_dir`), from their .tar.idx there (open_cached_shards); else scanned, the
// text the samples' .json members, one per line, and its shards, members and samples; each
// sample's line appended to `lines`. `limit` bounds the text (max_manifest_bytes).
Result<Manifest> read_shards(const std::string& source, const std::vector<std::string>& shards, std::size_t limit,
                             const storage::S3Options& s3, std::uint32_t manifest, std::vector<ManifestLine>& lines,
                             const std::string& cache_dir = "");

// The local shards `names` as manifest `source`, opened from their .tar.idx (at `index_paths`,
// one a shard; empty: beside each, "<shard>.idx", energon prepare's or mmfeed index's): 8 bytes a
// sample read and held, each sample's headers read when it is prepared (Manifest::ranges); nullopt
// where a shard is remote or has none (then scanned). One older than its shard, or one that does
// not follow its samples, is an error naming it.
Result<std::optional<Manifest>> open_tar_indexes(const std::string& source, const std::vector<std::string>& names,
                                                 const std::vector<std::string>& index_paths = {});

// The sample whose tar headers lie in bytes [offset, offset + length) of the local shard at `path`
// (its range by the shard's .tar.idx): its key, its members and its .json text, its headers read
// one by one and its .json (and extended headers) within `limit` bytes, never its media. An error
// says what is wrong (a header that does not decode, a member running past the range, members of
// two samples, no .json member), naming the byte.
Result<RangeSample> read_shard_range(const std::string& path, std::uint64_t offset, std::uint64_t length,
                                     std::size_t limit);

// What write_tar_indexes did: shards indexed now and kept (their .tar.idx current), their samples
// and index bytes; shards it could not read to their end (given no index: a Loader scans them),
// and samples that will fail, the first `most_named` of each named ("shard.tar/key: reason").
struct TarIndexesWritten {
  std::uint64_t written = 0, kept = 0, samples = 0, bytes = 0;
  std::uint64_t damaged_count = 0, bad_count = 0;
  std::vector<std::string> damaged, bad;
};

// Writes the .tar.idx energon prepare writes for each of `shards` (8 bytes little-endian a
// sample: its first header's offset, extended headers included; then where the last one ends),
// from a scan as read_shards scans (`limit`: max_manifest_bytes), into `index_paths` (one a shard;
// empty: beside each local shard), each written to a temporary file and renamed into place. A
// shard whose .tar.idx is current (a local shard's: newer than it; a remote one's: there and
// whole) is kept, so an interrupted run resumes; a damaged shard gets none.
Result<TarIndexesWritten> write_tar_indexes(const std::vector<std::string>& shards,
                                            const std::vector<std::string>& index_paths, std::size_t limit,
                                            const storage::S3Options& s3, std::size_t most_named);

// Reads `size` bytes at byte `at` of a shard into `into`; an error where it cannot (the shard
// ends before, unreachable).
using RangeReader = std::function<Status(std::uint64_t at, void* into, std::size_t size)>;

// What read_shard_range reads, from a shard read by `read`.
Result<RangeSample> parse_shard_range(const RangeReader& read, std::uint64_t offset, std::uint64_t length,
                                      std::size_t limit);

// True for a Megatron-Energon dataset: a local directory holding .nv-meta/split.yaml, or a
// remote prefix ending in '/' (whose .nv-meta/split.yaml is then read).
bool is_energon_dataset(std::string_view path);

inline constexpr std::size_t kMaxSplitFileBytes = std::size_t{16} << 20;  // .nv-meta/split.yaml

// An Energon split file's train split: its shards (`root`/name), less the excluded ones, and the
// excluded samples ("`root`/a.tar/key").
struct EnergonSplit {
  std::vector<std::string> shards;
  std::unordered_set<std::string> excluded_samples;
};

// The split file `yaml` (of the dataset at `root`; `where` names it in errors): its train and
// exclude lists' brace patterns expanded, each list within a NameBudget of its own.
Result<EnergonSplit> parse_energon_split(std::string_view yaml, const std::string& root, const std::string& where);

// The train split of an Energon-prepared dataset (`energon prepare`): its shards as
// .nv-meta/split.yaml lists them (brace patterns, relative to `dir`), less its excluded shards
// ("a.tar") and samples ("a.tar/key"), read as one source. Local shards with the .tar.idx energon
// prepare writes beside each (and no sample left out by key) open from those: 8 bytes a sample
// read and held, each sample's headers read when it is prepared (Manifest::ranges); a .tar.idx
// older than its shard is refused by name. Otherwise the shards are scanned as read_shards scans.
Result<Manifest> read_energon_dataset(const std::string& dir, std::size_t limit, const storage::S3Options& s3,
                                      std::uint32_t manifest, std::vector<ManifestLine>& lines);

}  // namespace mmfeed::dataset
