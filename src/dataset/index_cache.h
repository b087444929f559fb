// Opening a JSONL or JSON manifest from its dataset index (index.h), for the manifest reader
// (manifest.h): the local file's index beside it; else, with a node cache (`cache_dir`), the
// cache's, current or replaced -- fetched from beside a remote file ("<uri>.mmidx") or built there
// from its text, by the node's first reader under a lock while the others wait.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(std::optional<Manifest> m, open_indexed("s3://b/train.jsonl", indexes, 0, s3, limit));
//   if (!m) ...  // no index serves it: read it whole
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/owned_fd.h"
#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "storage/credentials.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

using core::OwnedFd;

// How long a reader waits for another reader of the node to finish an entry of the node cache.
inline constexpr std::chrono::minutes kIndexBuildWait{10};

// A lock of the node cache's entry `index` ("<index>.lock", flock: released if its holder dies),
// taken within kIndexBuildWait (another reader may be indexing or fetching `file`); dropping it
// unlocks.
Result<std::unique_ptr<OwnedFd>> lock_cache_entry(const std::string& index, const std::string& file);

// The index beside the remote file `file` at `uri` ("<uri>.mmidx"; none for a URL with a query:
// its signature is the file's) fetched into the node cache at `index` (written whole, at most
// max(limit, 1 GiB)): false where there is none (404, or 403 where a store hides what is missing).
Result<bool> fetch_index_beside(const std::string& file, const storage::ObjectUri& uri, const std::string& index,
                                const storage::S3Options& s3, std::size_t limit);

// The JSONL or JSON file `file` opened from its index, as manifest number `manifest`: a local
// one's beside it, else (with indexes.cache_dir) the node cache's, fetched or built if need be;
// nullopt when it has none, or is no file an index serves (compressed; remote without a cache_dir
// or an ETag). An index beside a local file, or fetched from beside a remote one, that does not
// check out is an error naming it: never used, never silently passed over (a stale one in the
// cache is the cache's to replace). `limit`: the longest sample text read (max_manifest_bytes).
Result<std::optional<Manifest>> open_indexed(const std::string& file, const Indexes& indexes, std::uint32_t manifest,
                                             const storage::S3Options& s3, std::size_t limit);

// The local shards `shards` (source `source`) opened from their .tar.idx in the node cache
// `cache_dir` ("<hash>-<shard>.tar.idx", hashed by the shard's path): under the source's lock,
// those missing there, or older than their shard, are written first (by the node's first reader,
// scanning; the others wait and open them), so each node reads the shards' headers once. nullopt
// where a shard is remote or damaged (then scanned, its damage named as a scan names it).
// Manifest::index_built says whether this reader wrote any.
Result<std::optional<Manifest>> open_cached_shards(const std::string& source, const std::vector<std::string>& shards,
                                                   const std::string& cache_dir, std::size_t limit);

}  // namespace mmfeed::dataset
