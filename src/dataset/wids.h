// A wids dataset descriptor (webdataset's indexed reader: a JSON file, "__kind__":
// "wids-shard-index-v1", "wids_version": 1, "shardlist": [{"url": "shard-000.tar", "nsamples":
// 1000}, ...], optionally "datasets": [{"shardlist": [...]}, ...] and "base") as a source: its
// shards, in order, read as a brace pattern of them would be (from their .tar.idx where each has
// one, else scanned), each shard's sample count checked against the descriptor's `nsamples`.
// Relative URLs resolve against "base" where given, else the descriptor's own folder (or URL
// prefix), as wids resolves them. A component naming another descriptor ("source_url") is not
// followed: refused by name.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(std::optional<WidsShards> w, parse_wids_descriptor(text, "train.json", "data"));
//   if (w) ...  // w->urls: data/shard-000.tar, ...; w->nsamples: 1000, ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/manifest.h"
#include "mmfeed/error.h"

namespace mmfeed::dataset {

struct WidsShards {
  std::vector<std::string> urls;
  std::vector<std::uint64_t> nsamples;  // by shard, as the descriptor states them
};

// The text `text` of a .json file (named `name`, in the folder or URL prefix `base_dir`) as a
// wids descriptor, its shards resolved; nullopt where it is none (not one JSON object naming
// "wids_version" among its first bytes: a JSON or JSONL manifest, read as one). A descriptor that
// is malformed (not JSON, another wids_version, a shard without url or nsamples, no shard, a
// source_url) is an error naming it.
Result<std::optional<WidsShards>> parse_wids_descriptor(std::string_view text, const std::string& name,
                                                        const std::string& base_dir);

// Whether manifest `m`, read from the shards of `wids`, holds in each shard the samples the
// descriptor says: an error naming the first shard that does not (a descriptor stale for its
// shards).
Status check_wids_counts(const Manifest& m, const WidsShards& wids, const std::string& name);

}  // namespace mmfeed::dataset
