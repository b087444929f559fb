// The media a manifest references: every "image" and "video" item of every message, in
// manifest order, resolved against the manifest's directory. The full manifest reader
// (sharding, shuffling, resume) builds on the same line parser.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(auto media, media_uris("data/train.jsonl"));
//   for (const MediaRef& m : media) fetcher.submit({.uri = m.uri});
#pragma once

#include <string>
#include <vector>

#include "mmfeed/error.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

struct MediaRef {
  storage::ObjectUri uri;
  std::string sample_id;
  std::size_t line = 0;  // 1-based line in the manifest
};

// Reads a local JSONL manifest. A malformed line, a sample without "messages", or a media item
// whose URI does not parse is an error naming the file, the line and the sample.
Result<std::vector<MediaRef>> media_uris(const std::string& manifest_path);

}  // namespace mmfeed::dataset
