// mmfeed fetch: fetch objects with the engine and report throughput, latency, retries and
// every failure by name. Exit status 1 when any object failed, 2 on bad usage.
#include "tools/commands.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "mmfeed/json.h"
#include "mmfeed/numbers.h"
#include "mmfeed/storage.h"

namespace mmfeed::tools {

namespace {

constexpr const char* kFetchUsage =
    "usage: mmfeed fetch [options] URI... | --from-manifest FILE\n"
    "\n"
    "Fetches every URI (s3://bucket/key, s3://bucket/prefix/ to list, http(s)://..., paths)\n"
    "and prints objects, bytes, objects/s, MB/s, latency percentiles, retries and failures.\n"
    "\n"
    "options:\n"
    "  --from-manifest FILE   fetch every image, video and audio clip a manifest (JSONL or JSON array)\n"
    "                         references\n"
    "  --endpoint URL         S3-compatible endpoint (default: $AWS_ENDPOINT_URL or AWS)\n"
    "  --region NAME          S3 region (default: $AWS_REGION or us-east-1)\n"
    "  --path-style           path-style S3 addressing (default for custom endpoints)\n"
    "  --no-sign-request      anonymous S3 access\n"
    "  --ca-bundle FILE       trusted certificates (PEM) for https (default: $AWS_CA_BUNDLE, system)\n"
    "  --inflight N           requests in flight (default 64)\n"
    "  --max-attempts N       attempts per request (default 5)\n"
    "  --first-byte-timeout MS, --attempt-timeout MS, --connect-timeout MS\n"
    "  --stall-timeout MS     fail an attempt that receives nothing for MS ms (default 10000)\n"
    "  --list-page-size N     keys per ListObjectsV2 page (default 1000)\n"
    "  --max-list-objects N   refuse a listing of more than N objects (default 1000000)\n"
    "  --max-list-pages N     refuse a listing of more than N pages (default 10000)\n"
    "  --media-root DIR       relative media references of the manifest resolve against DIR\n"
    "                         (a directory or URI prefix) instead of the manifest's directory\n"
    "  --allow-local-media-from-remote-manifest\n"
    "                         let a manifest fetched from http(s):// or s3:// name local files\n"
    "  --part-size BYTES      ranged-GET part size for large objects (default 8 MiB; 0 = whole)\n"
    "  --max-object-bytes N   refuse an object larger than N bytes before taking memory for it\n"
    "                         (default 536870912 = 512 MiB, the image decoder's limit)\n"
    "  --hedge QUANTILE       re-issue requests slower than this latency quantile (e.g. 0.95)\n"
    "  --hedge-min-ms MS      never hedge a request younger than this (default 100)\n"
    "  --repeat N             fetch the list N times (benchmarking)\n"
    "  --json                 print one JSON object instead of text\n"
    "  --checksums            with --json: each object's size and sha256\n";

// Requests in flight, as the Loader's fetch_inflight bounds them: curl counts connections in a long,
// and the results pending are twice as many.
constexpr std::size_t kMaxInflight = 4096;

struct Args {
  FetchJob job;
  bool json = false, checksums = false;
};

Result<Args> parse_args(int argc, char** argv) {
  Args a;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    // An integer in [min, max], at most what the field's type holds.
    auto int_option = [&](int min, auto* field, std::uint64_t max = UINT64_MAX) -> Status {
      using T = std::remove_pointer_t<decltype(field)>;
      const auto most = static_cast<T>(std::min(max, static_cast<std::uint64_t>(std::numeric_limits<T>::max())));
      const char* v = value();
      MMFEED_ASSIGN_OR_RETURN(*field, parse_number<T>(arg, v ? v : "", static_cast<T>(min), most));
      return ok_status();
    };
    if (arg == "--from-manifest") {
      const char* v = value();
      if (v == nullptr) return Error(ErrorCode::kInvalidArgument, "--from-manifest needs a file");
      a.job.manifest = v;
    } else if (arg == "--ca-bundle") {
      const char* v = value();
      if (v == nullptr) return Error(ErrorCode::kInvalidArgument, "--ca-bundle needs a file");
      a.job.fetch.ca_file = v;
    } else if (arg == "--endpoint" || arg == "--region") {
      const char* v = value();
      if (v == nullptr) return Error(ErrorCode::kInvalidArgument, arg + " needs a value");
      (arg == "--endpoint" ? a.job.endpoint : a.job.region) = v;
    } else if (arg == "--inflight") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.fetch.max_inflight, kMaxInflight));
      a.job.fetch.max_pending_results = std::max(a.job.fetch.max_pending_results, a.job.fetch.max_inflight * 2);
    } else if (arg == "--max-attempts") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.fetch.max_attempts));
    } else if (arg == "--first-byte-timeout") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.fetch.first_byte_timeout_ms));
    } else if (arg == "--attempt-timeout") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.fetch.attempt_timeout_ms));
    } else if (arg == "--connect-timeout") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.fetch.connect_timeout_ms));
    } else if (arg == "--stall-timeout") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.fetch.stall_timeout_ms));
    } else if (arg == "--list-page-size") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.list.max_keys));
    } else if (arg == "--max-list-objects") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.list.max_objects));
    } else if (arg == "--max-list-pages") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.list.max_pages));
    } else if (arg == "--media-root") {
      const char* v = value();
      if (v == nullptr) return Error(ErrorCode::kInvalidArgument, "--media-root needs a directory or URI prefix");
      a.job.media_root = {v};
    } else if (arg == "--allow-local-media-from-remote-manifest") {
      a.job.allow_local_media_from_remote_manifest = true;
    } else if (arg == "--part-size") {
      MMFEED_RETURN_IF_ERROR(int_option(0, &a.job.fetch.part_size));
    } else if (arg == "--max-object-bytes") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.fetch.max_object_bytes));
    } else if (arg == "--hedge-min-ms") {
      MMFEED_RETURN_IF_ERROR(int_option(0, &a.job.fetch.hedge_min_ms));
    } else if (arg == "--repeat") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.job.repeat));
    } else if (arg == "--hedge") {
      const char* v = value();
      const auto q = parse_number<double>(arg, v ? v : "", 0, 1);
      if (!q.ok() || *q <= 0 || *q >= 1)
        return Error(ErrorCode::kInvalidArgument, "--hedge needs a quantile in (0, 1)");
      a.job.fetch.hedge_quantile = *q;
    } else if (arg == "--path-style") {
      a.job.path_style = true;
    } else if (arg == "--no-sign-request") {
      a.job.anonymous = true;
    } else if (arg == "--json") {
      a.json = true;
    } else if (arg == "--checksums") {
      a.checksums = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return Error(ErrorCode::kInvalidArgument, "unknown option " + arg);
    } else {
      a.job.uris.push_back(arg);
    }
  }
  if (a.job.uris.empty() && a.job.manifest.empty()) return Error(ErrorCode::kInvalidArgument, "nothing to fetch");
  return a;
}

}  // namespace

int run_fetch(int argc, char** argv) {
  if (argc > 0 && (std::string(argv[0]) == "--help" || std::string(argv[0]) == "-h")) {
    std::fputs(kFetchUsage, stdout);
    return 0;
  }
  auto args = parse_args(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "mmfeed fetch: %s\n\n%s", args.error().to_string().c_str(), kFetchUsage);
    return 2;
  }
  std::string checksums;
  auto report = fetch_objects(args->job, [&](const FetchedObject& o) {
    if (!args->checksums) return;
    if (!checksums.empty()) checksums += ',';
    checksums += "{\"uri\":";
    append_json_string(checksums, o.uri);
    checksums += ",\"bytes\":" + std::to_string(o.data.size()) + ",\"attempts\":" + std::to_string(o.attempts) +
                 ",\"sha256\":\"" + sha256_hex({reinterpret_cast<const char*>(o.data.data()), o.data.size()}) + "\"}";
  });
  if (!report.ok()) {
    std::fprintf(stderr, "mmfeed fetch: %s\n", report.error().to_string().c_str());
    return 2;
  }
  const FetchReport& r = *report;
  if (args->json) {
    std::string out = "{\"objects\":" + std::to_string(r.objects) + ",\"ok\":" + std::to_string(r.ok) +
                      ",\"failed\":" + std::to_string(r.failed) + ",\"bytes\":" + std::to_string(r.bytes);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  ",\"seconds\":%.4f,\"objects_per_s\":%.2f,\"mb_per_s\":%.3f,\"latency_ms\":{\"p50\":%.3f,"
                  "\"p90\":%.3f,\"p99\":%.3f},\"first_byte_ms\":{\"p50\":%.3f,\"p99\":%.3f}",
                  r.seconds, r.objects_per_s(), r.mb_per_s(), r.latency_ms.p50, r.latency_ms.p90, r.latency_ms.p99,
                  r.first_byte_ms.p50, r.first_byte_ms.p99);
    out += buf;
    out += ",\"requests\":" + std::to_string(r.requests) + ",\"retries\":" + std::to_string(r.retries) +
           ",\"hedges\":" + std::to_string(r.hedges) + ",\"hedge_wins\":" + std::to_string(r.hedge_wins) +
           ",\"errors\":{";
    const char* sep = "";
    for (const auto& [kind, n] : r.errors_by_kind) {
      out += sep;
      append_json_string(out, kind);
      out += ":" + std::to_string(n);
      sep = ",";
    }
    out += "},\"failures\":[";
    sep = "";
    for (const FetchFailure& f : r.failures) {
      out += sep;
      out += "{\"uri\":";
      append_json_string(out, f.uri);
      out += ",\"error\":";
      append_json_string(out, f.message);
      out += ",\"attempts\":" + std::to_string(f.attempts) + "}";
      sep = ",";
    }
    out += "]";
    if (args->checksums) out += ",\"results\":[" + checksums + "]";
    out += "}\n";
    std::fputs(out.c_str(), stdout);
  } else {
    std::printf("fetched %llu objects (%llu ok, %llu failed), %.1f MB in %.2f s: %.1f objects/s, %.1f MB/s\n",
                static_cast<unsigned long long>(r.objects), static_cast<unsigned long long>(r.ok),
                static_cast<unsigned long long>(r.failed), static_cast<double>(r.bytes) / 1e6, r.seconds,
                r.objects_per_s(), r.mb_per_s());
    std::printf("latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms; first byte p50 %.1f ms, p99 %.1f ms\n",
                r.latency_ms.p50, r.latency_ms.p90, r.latency_ms.p99, r.first_byte_ms.p50, r.first_byte_ms.p99);
    std::printf("requests %lld, retries %lld, hedges %lld (%lld won)\n", static_cast<long long>(r.requests),
                static_cast<long long>(r.retries), static_cast<long long>(r.hedges),
                static_cast<long long>(r.hedge_wins));
    if (!r.errors_by_kind.empty()) {
      std::printf("errors:");
      for (const auto& [kind, n] : r.errors_by_kind) std::printf(" %s %d", kind.c_str(), n);
      std::printf("\n");
      for (const FetchFailure& f : r.failures) std::printf("  %s\n", f.message.c_str());
    }
  }
  return r.failed == 0 ? 0 : 1;
}

}  // namespace mmfeed::tools
