// A wids dataset descriptor (wids.h): parsed with simdjson, its URLs resolved as wids resolves
// them, the shards' sample counts checked against it.
#include "dataset/wids.h"

#include <simdjson.h>

#include <algorithm>

#include "dataset/source_files.h"

namespace mmfeed::dataset {

namespace {

constexpr std::size_t kHeadBytes = 4096;  // where "wids_version" is looked for

// `url` against `base` (a folder or a URL prefix): absolute URLs and paths as they are.
std::string resolve_url(std::string_view url, const std::string& base) {
  if (url.find("://") != std::string_view::npos || url.starts_with('/') || base.empty()) return std::string(url);
  std::string out = base;
  while (out.ends_with('/') && !out.ends_with("://")) out.pop_back();
  return out + "/" + std::string(url);
}

// A "shardlist" array's shards appended to `out`.
Status add_shards(simdjson::dom::element list, const std::string& base, const std::string& name, WidsShards& out) {
  simdjson::dom::array shards;
  if (list.get_array().get(shards) != simdjson::SUCCESS) {
    return Error(ErrorCode::kCorruptData, "its shardlist is not an array", name);
  }
  for (simdjson::dom::element shard : shards) {
    std::string_view url;
    std::uint64_t nsamples = 0;
    if (shard["url"].get_string().get(url) != simdjson::SUCCESS ||
        shard["nsamples"].get_uint64().get(nsamples) != simdjson::SUCCESS) {
      return Error(ErrorCode::kCorruptData,
                   "shard " + std::to_string(out.urls.size()) + " of its shardlist has no url or nsamples", name);
    }
    out.urls.push_back(resolve_url(url, base));
    out.nsamples.push_back(nsamples);
  }
  return ok_status();
}

}  // namespace

Result<std::optional<WidsShards>> parse_wids_descriptor(std::string_view text, const std::string& name,
                                                        const std::string& base_dir) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{' ||
      text.substr(0, kHeadBytes).find("\"wids_version\"") == std::string_view::npos) {
    return std::optional<WidsShards>();
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text.data(), text.size()).get(doc) != simdjson::SUCCESS) {
    // A JSONL manifest whose first line names "wids_version": its first line is JSON of its own.
    const std::string_view line = text.substr(first, text.find('\n', first) - first);
    simdjson::dom::parser one;
    if (line.size() < text.size() - first && one.parse(line.data(), line.size()).error() == simdjson::SUCCESS) {
      return std::optional<WidsShards>();
    }
    return Error(ErrorCode::kCorruptData, "a wids descriptor that is not JSON", name);
  }
  std::uint64_t version = 0;
  if (doc["wids_version"].get_uint64().get(version) != simdjson::SUCCESS || version != 1) {
    return Error(ErrorCode::kUnsupported, "a wids descriptor of another wids_version (this mmfeed reads 1)", name);
  }
  std::string_view given_base;
  const std::string base =
      doc["base"].get_string().get(given_base) == simdjson::SUCCESS ? std::string(given_base) : base_dir;
  WidsShards out;
  if (simdjson::dom::element list; doc["shardlist"].get(list) == simdjson::SUCCESS) {
    MMFEED_RETURN_IF_ERROR(add_shards(list, base, name, out));
  }
  if (simdjson::dom::array components; doc["datasets"].get_array().get(components) == simdjson::SUCCESS) {
    for (simdjson::dom::element component : components) {
      if (simdjson::dom::element ignored; component["source_url"].get(ignored) == simdjson::SUCCESS) {
        return Error(ErrorCode::kUnsupported,
                     "a dataset component naming another descriptor (source_url) is not followed: list its shards",
                     name);
      }
      if (simdjson::dom::element list; component["shardlist"].get(list) == simdjson::SUCCESS) {
        MMFEED_RETURN_IF_ERROR(add_shards(list, base, name, out));
      }
    }
  }
  if (out.urls.empty()) return Error(ErrorCode::kNotFound, "a wids descriptor naming no shard", name);
  for (const std::string& url : out.urls) {
    if (layout_of(url.substr(0, url.find_first_of("?#"))) != Layout::kShards) {
      return Error(ErrorCode::kUnsupported, "its shard " + url + " is no .tar", name);
    }
  }
  return std::optional<WidsShards>(std::move(out));
}

Status check_wids_counts(const Manifest& m, const WidsShards& wids, const std::string& name) {
  std::vector<std::uint64_t> held(m.shards.size(), 0);
  if (m.ranges) {
    for (std::size_t k = 0; k < held.size(); ++k) held[k] = m.ranges->starts[k].size() - 1;
  } else {
    for (const ShardSample& s : m.samples) ++held[s.shard];
  }
  for (std::size_t k = 0; k < held.size() && k < wids.nsamples.size(); ++k) {
    if (held[k] != wids.nsamples[k]) {
      return Error(ErrorCode::kInvalidArgument,
                   "its shard " + m.shards[k].name + " holds " + std::to_string(held[k]) +
                       " samples, the descriptor says " + std::to_string(wids.nsamples[k]) +
                       " (the shard or the descriptor changed since it was written)",
                   name);
    }
  }
  return ok_status();
}

}  // namespace mmfeed::dataset
