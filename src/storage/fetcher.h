// The fetch engine: many GETs in flight on one I/O thread, none lost, none hung.
//
// S3 and HTTP(S) objects go through libcurl's multi interface (keep-alive connections, a
// share handle for DNS and TLS sessions); local regular files are read with pread on a few
// reader threads (storage/file_reader.h) under the same attempt deadline.
// Every request ends in exactly one FetchResult, bytes or an Error naming the URI:
//   - deadlines: connect, first byte, whole attempt, and a stall (low-speed) limit;
//   - retries with exponential backoff and full jitter on 5xx, 429/503 SlowDown, connection
//     resets, timeouts and truncated bodies; 404, 403, a redirect loop and an object over the
//     size limit are final at once;
//   - protocols: http and https only, on every GET and every redirect, and a redirect from https
//     only to https; a redirect elsewhere is final, naming its target;
//   - hedging (opt-in): a second GET for a request still running past a latency quantile,
//     the first answer wins;
//   - large objects: the first GET asks for part_size bytes; if the object is larger, the
//     rest is fetched as parallel ranged GETs pinned to the first answer's ETag (If-Match);
//   - truncation: bodies are checked against Content-Length and Content-Range;
//   - size: no object larger than max_object_bytes is given memory, whatever its length header
//     says; a failed allocation is that object's error, never the process's end.
// Memory is bounded: requests in flight, finished results not yet taken, and the bytes the
// in-flight requests hold all have limits; submit() blocks when the engine is full.
//
// Example:
//   Fetcher fetcher(FetchOptions{.max_inflight = 128}, s3_options);
//   for (auto& uri : uris) fetcher.submit({.uri = uri, .tag = i++});
//   fetcher.close();
//   while (auto r = fetcher.next()) {
//     if (r->data.ok()) decode(r->data->span()); else log(r->data.error().to_string());
//   }
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/buffer_pool.h"
#include "core/metrics.h"
#include "core/trace.h"
#include "mmfeed/error.h"
#include "mmfeed/storage.h"
#include "storage/credentials.h"
#include "storage/uri.h"

namespace mmfeed::storage {

using mmfeed::FetchOptions;  // the public API's (mmfeed/storage.h)

struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct FetchRequest {
  ObjectUri uri;
  std::uint64_t tag = 0;           // the caller's cookie (a sample index), returned as is
  std::optional<ByteRange> range;  // fetch only these bytes (one GET, no parts)
  // Sent as If-Match on every GET of it: the bytes of this version of the object or none (a 412,
  // the object replaced since its ETag was learned, is final at once: kUnavailable). Remote only.
  std::string if_match{};
};

struct FetchResult {
  std::uint64_t tag = 0;
  std::string uri;  // as shown (ObjectUri::to_string): its credentials redacted
  Result<core::Buffer> data = Error(ErrorCode::kInternal, "unset");
  int attempts = 0;  // GETs sent for this object (parts and hedges included)
  int retries = 0;
  int http_status = 0;  // of the last answer; 0 for local files or no answer
  bool hedge_won = false;
  std::int64_t latency_ns = 0;  // from start (not submission) to completion
  // The whole object's size, when an HTTP answer declared it (a Content-Range total, or the body
  // of a 200); 0 when unknown (local files: the caller stats them).
  std::uint64_t object_size = 0;
  std::string etag;  // the answer's ETag, as sent (quotes included); empty: none, or a local file
};

class Fetcher {
 public:
  // `metrics` and `trace` may be null; when given they must outlive the Fetcher.
  Fetcher(FetchOptions options, S3Options s3, core::MetricsRegistry* metrics = nullptr,
          core::TraceWriter* trace = nullptr);
  ~Fetcher();  // cancel(), then join the I/O thread; never waits for a local read that hangs
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  // Queues a request; blocks while queue_capacity requests wait. False after close()/cancel().
  bool submit(FetchRequest request);

  // The next finished request, in completion order; nullopt once closed and all delivered.
  std::optional<FetchResult> next();
  std::optional<FetchResult> next_for(std::chrono::milliseconds timeout);

  // No more submissions; what was submitted still completes.
  void close();
  // Ends everything now: each request not yet delivered is delivered with kCancelled, local
  // reads still running included (they are abandoned, not waited for).
  void cancel();

  const FetchOptions& options() const { return options_; }
  const S3Options& s3_options() const { return s3_; }

  class Engine;

 private:
  FetchOptions options_;
  S3Options s3_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace mmfeed::storage
