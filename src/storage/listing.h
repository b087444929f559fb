// ListObjectsV2: expanding s3://bucket/prefix/ into the objects under it, page by page,
// following continuation tokens (a token the server repeats is an error, not a loop). Pages are
// fetched one after another (each names the next), with the fetch engine's retry rules for
// throttling and server errors.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(auto objects, list_objects(s3, "bucket", "train/"));
//   for (const S3Object& o : objects) fetcher.submit({.uri = {.scheme = Scheme::kS3, ...}});
#pragma once

#include <string_view>
#include <vector>

#include "mmfeed/error.h"
#include "storage/credentials.h"
#include "storage/s3.h"

namespace mmfeed::storage {

struct ListOptions {
  int max_keys = 1000;  // per page
  int max_attempts = 5;
  int timeout_ms = 30000;
};

// Every object whose key starts with `prefix`, in S3's (UTF-8 binary) key order.
Result<std::vector<S3Object>> list_objects(const S3Options& s3, std::string_view bucket,
                                           std::string_view prefix, const ListOptions& options = {});

}  // namespace mmfeed::storage
