// ListObjectsV2: expanding s3://bucket/prefix/ into the objects under it, page by page,
// following continuation tokens (a token the server repeats is an error, not a loop). Pages are
// fetched one after another (each names the next), with the fetch engine's retry rules for
// throttling and server errors. What an endpoint sends is bounded as it arrives: each answer's
// bytes, the objects kept and the pages asked for have limits, so that an endpoint whose answer
// or listing never ends costs a stated amount of memory and time, then an error naming the limit.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(auto objects, list_objects(s3, "bucket", "train/"));
//   for (const S3Object& o : objects) fetcher.submit({.uri = {.scheme = Scheme::kS3, ...}});
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"
#include "mmfeed/storage.h"
#include "storage/credentials.h"
#include "storage/s3.h"

namespace mmfeed::storage {

using mmfeed::ListOptions;  // the public API's (mmfeed/storage.h)

// Every object whose key starts with `prefix`, in S3's (UTF-8 binary) key order.
// kResourceExhausted, not retried, when an answer passes max_page_bytes, or the listing passes
// max_objects or max_pages; the error names the limit.
Result<std::vector<S3Object>> list_objects(const S3Options& s3, std::string_view bucket, std::string_view prefix,
                                           const ListOptions& options = {});

}  // namespace mmfeed::storage
