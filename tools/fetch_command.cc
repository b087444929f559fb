// mmfeed fetch: fetch objects with the engine and report throughput, latency, retries and
// every failure by name. Exit status 1 when any object failed, 2 on bad usage.
#include "tools/commands.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/json.h"
#include "core/metrics.h"
#include "core/numbers.h"
#include "dataset/manifest.h"
#include "storage/fetcher.h"
#include "storage/listing.h"
#include "storage/redact.h"
#include "storage/sigv4.h"

namespace mmfeed::tools {

namespace {

constexpr const char* kFetchUsage =
    "usage: mmfeed fetch [options] URI... | --from-manifest FILE\n"
    "\n"
    "Fetches every URI (s3://bucket/key, s3://bucket/prefix/ to list, http(s)://..., paths)\n"
    "and prints objects, bytes, objects/s, MB/s, latency percentiles, retries and failures.\n"
    "\n"
    "options:\n"
    "  --from-manifest FILE   fetch every image/video a manifest (JSONL or JSON array) references\n"
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
  std::vector<std::string> uris;
  std::string manifest;
  storage::FetchOptions fetch;
  std::string endpoint, region;
  bool path_style = false, anonymous = false, json = false, checksums = false;
  bool allow_local_media_from_remote_manifest = false;
  std::vector<std::string> media_root;  // --media-root: relative references resolve against it
  int repeat = 1;
  storage::ListOptions list;
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
      MMFEED_ASSIGN_OR_RETURN(*field, core::parse_number<T>(arg, v ? v : "", static_cast<T>(min), most));
      return ok_status();
    };
    if (arg == "--from-manifest") {
      const char* v = value();
      if (v == nullptr) return Error(ErrorCode::kInvalidArgument, "--from-manifest needs a file");
      a.manifest = v;
    } else if (arg == "--ca-bundle") {
      const char* v = value();
      if (v == nullptr) return Error(ErrorCode::kInvalidArgument, "--ca-bundle needs a file");
      a.fetch.ca_file = v;
    } else if (arg == "--endpoint" || arg == "--region") {
      const char* v = value();
      if (v == nullptr) return Error(ErrorCode::kInvalidArgument, arg + " needs a value");
      (arg == "--endpoint" ? a.endpoint : a.region) = v;
    } else if (arg == "--inflight") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.fetch.max_inflight, kMaxInflight));
      a.fetch.max_pending_results = std::max(a.fetch.max_pending_results, a.fetch.max_inflight * 2);
    } else if (arg == "--max-attempts") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.fetch.max_attempts));
    } else if (arg == "--first-byte-timeout") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.fetch.first_byte_timeout_ms));
    } else if (arg == "--attempt-timeout") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.fetch.attempt_timeout_ms));
    } else if (arg == "--connect-timeout") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.fetch.connect_timeout_ms));
    } else if (arg == "--stall-timeout") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.fetch.stall_timeout_ms));
    } else if (arg == "--list-page-size") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.list.max_keys));
    } else if (arg == "--max-list-objects") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.list.max_objects));
    } else if (arg == "--max-list-pages") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.list.max_pages));
    } else if (arg == "--media-root") {
      const char* v = value();
      if (v == nullptr) return Error(ErrorCode::kInvalidArgument, "--media-root needs a directory or URI prefix");
      a.media_root = {v};
    } else if (arg == "--allow-local-media-from-remote-manifest") {
      a.allow_local_media_from_remote_manifest = true;
    } else if (arg == "--part-size") {
      MMFEED_RETURN_IF_ERROR(int_option(0, &a.fetch.part_size));
    } else if (arg == "--max-object-bytes") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.fetch.max_object_bytes));
    } else if (arg == "--hedge-min-ms") {
      MMFEED_RETURN_IF_ERROR(int_option(0, &a.fetch.hedge_min_ms));
    } else if (arg == "--repeat") {
      MMFEED_RETURN_IF_ERROR(int_option(1, &a.repeat));
    } else if (arg == "--hedge") {
      const char* v = value();
      const auto q = core::parse_number<double>(arg, v ? v : "", 0, 1);
      if (!q.ok() || *q <= 0 || *q >= 1)
        return Error(ErrorCode::kInvalidArgument, "--hedge needs a quantile in (0, 1)");
      a.fetch.hedge_quantile = *q;
    } else if (arg == "--path-style") {
      a.path_style = true;
    } else if (arg == "--no-sign-request") {
      a.anonymous = true;
    } else if (arg == "--json") {
      a.json = true;
    } else if (arg == "--checksums") {
      a.checksums = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return Error(ErrorCode::kInvalidArgument, "unknown option " + arg);
    } else {
      a.uris.push_back(arg);
    }
  }
  if (a.uris.empty() && a.manifest.empty()) return Error(ErrorCode::kInvalidArgument, "nothing to fetch");
  return a;
}

double ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

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
  auto s3 = storage::s3_options_from_environment();
  if (!s3.ok()) {
    std::fprintf(stderr, "mmfeed fetch: %s\n", s3.error().to_string().c_str());
    return 2;
  }
  if (!args->endpoint.empty()) s3->endpoint = args->endpoint;
  if (!args->region.empty()) s3->region = args->region;
  if (args->path_style) s3->addressing = storage::Addressing::kPath;
  if (args->anonymous) s3->anonymous = true;

  std::uint64_t ok = 0, failed = 0, bytes = 0;
  std::map<std::string, int> errors_by_kind;
  struct Failure {
    std::string uri, message;
    int attempts;
  };
  std::vector<Failure> failures;
  // What to fetch: URIs (prefixes ending in '/' are listed) and the manifest's media. A prefix
  // that cannot be listed is one failure in the report; the other URIs are still fetched.
  std::vector<storage::FetchRequest> targets;  // tags set when submitted
  for (const std::string& text : args->uris) {
    auto uri = storage::parse_uri(text);
    if (!uri.ok()) {
      std::fprintf(stderr, "mmfeed fetch: %s\n", uri.error().to_string().c_str());
      return 2;
    }
    if (uri->scheme == storage::Scheme::kS3 && (uri->key.empty() || uri->key.back() == '/')) {
      auto listed = storage::list_objects(*s3, uri->bucket, uri->key, args->list);
      if (!listed.ok()) {
        ++failed;
        ++errors_by_kind[std::string(error_code_name(listed.error().code()))];
        failures.push_back({storage::redact_uri(text), listed.error().to_string(), 0});
        continue;
      }
      for (const auto& o : *listed) {
        targets.push_back({storage::ObjectUri{storage::Scheme::kS3, "", "", uri->bucket, o.key}, 0, std::nullopt});
      }
    } else {
      targets.push_back({std::move(uri).value(), 0, std::nullopt});
    }
  }
  if (!args->manifest.empty()) {  // read as the Loader reads it (local or remote, compressed or not)
    auto manifests = dataset::read_manifests({args->manifest}, dataset::kDefaultMaxManifestBytes, *s3);
    auto media = manifests.ok()
                     ? dataset::media_of(*manifests, args->media_root, args->allow_local_media_from_remote_manifest)
                     : Result<std::vector<dataset::MediaRef>>(manifests.error());
    if (!media.ok()) {
      std::fprintf(stderr, "mmfeed fetch: %s\n", media.error().to_string().c_str());
      return 2;
    }
    for (auto& m : *media) targets.push_back({std::move(m.source.uri), 0, m.source.range});
  }

  core::MetricsRegistry metrics;
  storage::Fetcher fetcher(args->fetch, *s3, &metrics);
  const core::Stopwatch clock;
  std::uint64_t submitted = 0;
  std::thread producer([&] {
    for (int r = 0; r < args->repeat; ++r) {
      for (const auto& t : targets) {
        if (!fetcher.submit({t.uri, submitted++, t.range})) return;
      }
    }
    fetcher.close();
  });

  std::string checksums;
  while (auto r = fetcher.next()) {
    if (r->data.ok()) {
      ++ok;
      bytes += r->data->size();
      if (args->checksums) {
        if (!checksums.empty()) checksums += ',';
        checksums += "{\"uri\":";
        core::append_json_string(checksums, r->uri);
        checksums += ",\"bytes\":" + std::to_string(r->data->size()) + ",\"attempts\":" + std::to_string(r->attempts) +
                     ",\"sha256\":\"" +
                     storage::sha256_hex({reinterpret_cast<const char*>(r->data->data()), r->data->size()}) + "\"}";
      }
    } else {
      ++failed;
      ++errors_by_kind[std::string(error_code_name(r->data.error().code()))];
      failures.push_back({r->uri, r->data.error().to_string(), r->attempts});
    }
  }
  producer.join();
  const double seconds = clock.elapsed_s();
  const auto snap = metrics.snapshot();
  const auto& lat = snap.histograms.at("fetch.latency_ns");
  const auto& ttfb = snap.histograms.at("fetch.first_byte_ns");
  const double objects_per_s = static_cast<double>(ok + failed) / seconds;
  const double mb_per_s = static_cast<double>(bytes) / 1e6 / seconds;

  if (args->json) {
    std::string out = "{\"objects\":" + std::to_string(ok + failed) + ",\"ok\":" + std::to_string(ok) +
                      ",\"failed\":" + std::to_string(failed) + ",\"bytes\":" + std::to_string(bytes);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  ",\"seconds\":%.4f,\"objects_per_s\":%.2f,\"mb_per_s\":%.3f,\"latency_ms\":{\"p50\":%.3f,"
                  "\"p90\":%.3f,\"p99\":%.3f},\"first_byte_ms\":{\"p50\":%.3f,\"p99\":%.3f}",
                  seconds, objects_per_s, mb_per_s, ms(lat.percentile(0.5)), ms(lat.percentile(0.9)),
                  ms(lat.percentile(0.99)), ms(ttfb.percentile(0.5)), ms(ttfb.percentile(0.99)));
    out += buf;
    out += ",\"requests\":" + std::to_string(snap.counters.at("fetch.requests")) +
           ",\"retries\":" + std::to_string(snap.counters.at("fetch.retries")) +
           ",\"hedges\":" + std::to_string(snap.counters.at("fetch.hedges")) +
           ",\"hedge_wins\":" + std::to_string(snap.counters.at("fetch.hedge_wins")) + ",\"errors\":{";
    const char* sep = "";
    for (const auto& [kind, n] : errors_by_kind) {
      out += sep;
      core::append_json_string(out, kind);
      out += ":" + std::to_string(n);
      sep = ",";
    }
    out += "},\"failures\":[";
    sep = "";
    for (const auto& [uri, message, attempts] : failures) {
      out += sep;
      out += "{\"uri\":";
      core::append_json_string(out, uri);
      out += ",\"error\":";
      core::append_json_string(out, message);
      out += ",\"attempts\":" + std::to_string(attempts) + "}";
      sep = ",";
    }
    out += "]";
    if (args->checksums) out += ",\"results\":[" + checksums + "]";
    out += "}\n";
    std::fputs(out.c_str(), stdout);
  } else {
    std::printf("fetched %llu objects (%llu ok, %llu failed), %.1f MB in %.2f s: %.1f objects/s, %.1f MB/s\n",
                static_cast<unsigned long long>(ok + failed), static_cast<unsigned long long>(ok),
                static_cast<unsigned long long>(failed), static_cast<double>(bytes) / 1e6, seconds, objects_per_s,
                mb_per_s);
    std::printf("latency p50 %.1f ms, p90 %.1f ms, p99 %.1f ms; first byte p50 %.1f ms, p99 %.1f ms\n",
                ms(lat.percentile(0.5)), ms(lat.percentile(0.9)), ms(lat.percentile(0.99)), ms(ttfb.percentile(0.5)),
                ms(ttfb.percentile(0.99)));
    std::printf("requests %lld, retries %lld, hedges %lld (%lld won)\n",
                static_cast<long long>(snap.counters.at("fetch.requests")),
                static_cast<long long>(snap.counters.at("fetch.retries")),
                static_cast<long long>(snap.counters.at("fetch.hedges")),
                static_cast<long long>(snap.counters.at("fetch.hedge_wins")));
    if (!errors_by_kind.empty()) {
      std::printf("errors:");
      for (const auto& [kind, n] : errors_by_kind) std::printf(" %s %d", kind.c_str(), n);
      std::printf("\n");
      for (const auto& f : failures) std::printf("  %s\n", f.message.c_str());
    }
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace mmfeed::tools
