// Object storage as the Loader reads it — S3 (signed with our own SigV4), HTTP(S) and local
// files, many requests in flight with deadlines, retries and hedging — offered for what users do
// with it beside a Loader: fetch a set of objects and see what it cost (`mmfeed fetch`), and sign
// a request as mmfeed signs its own.
//
// Example:
//   FetchJob job;
//   job.uris = {"s3://bucket/train/"};  // a prefix ending in '/' is listed
//   job.fetch.max_inflight = 256;
//   MMFEED_ASSIGN_OR_RETURN(FetchReport r, fetch_objects(job));
//   std::printf("%llu objects, %.1f MB/s, p99 %.1f ms\n", r.objects, r.mb_per_s(), r.latency_ms.p99);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed {

// How the fetch engine fetches: its limits, deadlines, retries and hedging.
struct FetchOptions {
  std::size_t max_inflight = 64;                // HTTP requests in flight (parts and hedges count)
  std::size_t max_pending_results = 256;        // in flight + finished but not yet taken
  std::size_t max_inflight_bytes = 1ull << 30;  // bytes held by requests in flight
  std::size_t queue_capacity = 1024;            // submitted, not yet started
  int connect_timeout_ms = 5000;
  int first_byte_timeout_ms = 15000;  // from the start of an attempt to its first response byte
  int attempt_timeout_ms = 120000;    // one whole attempt
  int stall_timeout_ms = 10000;       // no body bytes for this long after the first: a stall
  int low_speed_bytes_per_s = 1024;   // a transfer slower than this (curl's moving average) ...
  int low_speed_time_s = 30;          // ... for this long is a stall too (a trickle)
  int max_attempts = 5;
  int backoff_base_ms = 100;  // attempt n waits uniform(0, min(max, base * 2^(n-1)))
  int backoff_max_ms = 5000;
  double hedge_quantile = 0.0;       // 0 disables; 0.95 hedges requests slower than the p95
  int hedge_min_ms = 100;            // never hedge earlier than this
  std::size_t part_size = 8u << 20;  // ranged-GET part size; 0 fetches every object whole
  // The largest object accepted, checked against every size a server or the file system
  // declares before memory is committed for it (and against a body of unknown length as it
  // grows). 512 MiB is the image decoder's own input limit :
  // a larger object could not be decoded anyway.
  std::uint64_t max_object_bytes = 512u << 20;
  // The option refusals tell the user to raise: the Loader's smaller of max_object_bytes and
  // max_buffered_bytes, whichever set max_object_bytes.
  std::string max_object_bytes_option = "max_object_bytes";
  // Threads reading local files. A read still running at attempt_timeout_ms (a stalled network
  // mount) is abandoned with its thread, which then serves no other read.
  std::size_t local_threads = 2;
  bool verify_tls = true;
  std::string ca_file;                  // PEM bundle of trusted certificates; empty: $AWS_CA_BUNDLE, else the system's
  std::uint64_t seed = 0x6d6d66656564;  // backoff jitter
};

// How an S3 prefix is listed (ListObjectsV2), and what an endpoint's answers may cost.
struct ListOptions {
  int max_keys = 1000;  // per page
  int max_attempts = 5;
  int timeout_ms = 30000;
  // One answer's body: S3's pages of at most 1000 keys of at most 1 KiB each, XML-escaped, stay
  // below it.
  std::size_t max_page_bytes = std::size_t{16} << 20;
  std::size_t max_objects = 1'000'000;  // objects kept across pages (--max-list-objects)
  std::size_t max_pages = 10'000;       // pages asked for (--max-list-pages)
};

// What to fetch, from where, and how.
struct FetchJob {
  // s3://bucket/key (s3://bucket/prefix/ is listed), http(s):// URLs and local paths.
  std::vector<std::string> uris;
  // A manifest (read as the Loader reads it) whose every image and video is fetched too.
  std::string manifest;
  std::vector<std::string> media_root;  // where its relative references resolve (LoaderConfig's)
  bool allow_local_media_from_remote_manifest = false;
  // S3: from the environment as the AWS CLI resolves it, then these where set.
  std::string endpoint;
  std::string region;
  bool path_style = false;
  bool anonymous = false;  // unsigned requests
  FetchOptions fetch;
  ListOptions list;
  int repeat = 1;  // fetch the list this many times (benchmarking)
};

// One object fetched, handed to fetch_objects' callback (its bytes valid during the call).
struct FetchedObject {
  std::string uri;  // credentials redacted
  std::span<const std::byte> data;
  int attempts = 0;
};

struct FetchFailure {
  std::string uri;  // credentials redacted
  std::string message;
  int attempts = 0;  // 0: a prefix that could not be listed
};

struct LatencyMs {
  double p50 = 0, p90 = 0, p99 = 0;
};

struct FetchReport {
  std::uint64_t objects = 0, ok = 0, failed = 0, bytes = 0;
  double seconds = 0;
  LatencyMs latency_ms;     // whole requests
  LatencyMs first_byte_ms;  // to the first response byte
  std::int64_t requests = 0, retries = 0, hedges = 0, hedge_wins = 0;
  std::map<std::string, int> errors_by_kind;  // error code name -> failures
  std::vector<FetchFailure> failures;

  double objects_per_s() const { return static_cast<double>(objects) / seconds; }
  double mb_per_s() const { return static_cast<double>(bytes) / 1e6 / seconds; }
};

// Fetches every object of `job` with the fetch engine, `on_object` (when given) called on the
// caller's thread for each one that arrives. An object that fails (or a prefix that cannot be
// listed) is a failure in the report, the rest still fetched; an error is returned for the job
// itself: a malformed URI, the S3 configuration, an unreadable manifest.
Result<FetchReport> fetch_objects(const FetchJob& job,
                                  const std::function<void(const FetchedObject&)>& on_object = nullptr);

// One request signed with AWS Signature Version 4, as mmfeed's S3 client signs it.
struct SigV4Request {
  std::string method = "GET";
  std::string host{};                                          // the Host header
  std::string path{};                                          // raw (unencoded), starting with '/'
  std::vector<std::pair<std::string, std::string>> query{};    // raw names and values
  std::vector<std::pair<std::string, std::string>> headers{};  // extra headers to sign
  std::string payload_hash = "UNSIGNED-PAYLOAD";
  bool add_content_sha256_header = true;  // S3 wants x-amz-content-sha256; other services do not
  std::string access_key{};
  std::string secret_key{};
  std::string session_token{};
  std::string region = "us-east-1";
  std::string service = "s3";
  std::string amz_date{};  // "20130524T000000Z"
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;
  std::string authorization;
  std::vector<std::pair<std::string, std::string>> headers;  // every header to send, in canonical order
};

SigV4Signature sign_request_v4(const SigV4Request& request);

// The SHA-256 of `data`, in lowercase hex.
std::string sha256_hex(std::string_view data);

}  // namespace mmfeed
