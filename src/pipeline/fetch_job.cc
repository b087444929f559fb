// The public storage API (include/mmfeed/storage.h): a fetch job over the fetch engine, and
// SigV4 signing.
#include <thread>

#include "core/clock.h"
#include "core/metrics.h"
#include "dataset/manifest.h"
#include "mmfeed/storage.h"
#include "storage/credentials.h"
#include "storage/fetcher.h"
#include "storage/listing.h"
#include "storage/redact.h"
#include "storage/sigv4.h"

namespace mmfeed {

namespace {

double ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

LatencyMs latency_of(const core::HistogramSnapshot& h) {
  return {ms(h.percentile(0.5)), ms(h.percentile(0.9)), ms(h.percentile(0.99))};
}

void count_failure(FetchReport& report, FetchFailure failure, ErrorCode code) {
  ++report.failed;
  ++report.errors_by_kind[std::string(error_code_name(code))];
  report.failures.push_back(std::move(failure));
}

}  // namespace

Result<FetchReport> fetch_objects(const FetchJob& job, const std::function<void(const FetchedObject&)>& on_object) {
  MMFEED_ASSIGN_OR_RETURN(storage::S3Options s3, storage::s3_options_from_environment());
  if (!job.endpoint.empty()) s3.endpoint = job.endpoint;
  if (!job.region.empty()) s3.region = job.region;
  if (job.path_style) s3.addressing = storage::Addressing::kPath;
  if (job.anonymous) s3.anonymous = true;

  FetchReport report;
  // What to fetch: URIs (prefixes ending in '/' listed) and the manifest's media. A prefix that
  // cannot be listed is one failure in the report; the other URIs are still fetched.
  std::vector<storage::FetchRequest> targets;
  for (const std::string& text : job.uris) {
    MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(text));
    if (uri.scheme == storage::Scheme::kS3 && (uri.key.empty() || uri.key.back() == '/')) {
      auto listed = storage::list_objects(s3, uri.bucket, uri.key, job.list);
      if (!listed.ok()) {
        count_failure(report, {storage::redact_uri(text), listed.error().to_string(), 0}, listed.error().code());
        continue;
      }
      for (const storage::S3Object& o : *listed) {
        targets.push_back({storage::ObjectUri{storage::Scheme::kS3, "", "", uri.bucket, o.key}, 0, std::nullopt});
      }
    } else {
      targets.push_back({std::move(uri), 0, std::nullopt});
    }
  }
  if (!job.manifest.empty()) {  // read as the Loader reads it (local or remote, compressed or not)
    MMFEED_ASSIGN_OR_RETURN(dataset::Manifests manifests,
                            dataset::read_manifests({job.manifest}, dataset::kDefaultMaxManifestBytes, s3));
    MMFEED_ASSIGN_OR_RETURN(std::vector<dataset::MediaRef> media,
                            dataset::media_of(manifests, job.media_root, job.allow_local_media_from_remote_manifest));
    for (dataset::MediaRef& m : media) targets.push_back({std::move(m.source.uri), 0, m.source.range});
  }

  core::MetricsRegistry metrics;
  storage::Fetcher fetcher(job.fetch, s3, &metrics);
  const core::Stopwatch clock;
  std::uint64_t submitted = 0;
  std::thread producer([&] {
    for (int r = 0; r < job.repeat; ++r) {
      for (const storage::FetchRequest& t : targets) {
        if (!fetcher.submit({t.uri, submitted++, t.range})) return;
      }
    }
    fetcher.close();
  });
  while (auto r = fetcher.next()) {
    if (r->data.ok()) {
      ++report.ok;
      report.bytes += r->data->size();
      if (on_object) on_object({r->uri, r->data->span(), r->attempts});
    } else {
      count_failure(report, {r->uri, r->data.error().to_string(), r->attempts}, r->data.error().code());
    }
  }
  producer.join();
  report.seconds = clock.elapsed_s();
  report.objects = report.ok + report.failed;
  const core::MetricsSnapshot snap = metrics.snapshot();
  report.latency_ms = latency_of(snap.histograms.at("fetch.latency_ns"));
  report.first_byte_ms = latency_of(snap.histograms.at("fetch.first_byte_ns"));
  report.requests = snap.counters.at("fetch.requests");
  report.retries = snap.counters.at("fetch.retries");
  report.hedges = snap.counters.at("fetch.hedges");
  report.hedge_wins = snap.counters.at("fetch.hedge_wins");
  return report;
}

SigV4Signature sign_request_v4(const SigV4Request& request) {
  storage::SigningRequest req;
  req.method = request.method;
  req.host = request.host;
  req.path = request.path;
  req.query = request.query;
  req.headers = request.headers;
  req.payload_hash = request.payload_hash;
  req.add_content_sha256_header = request.add_content_sha256_header;
  const storage::Credentials creds{request.access_key, request.secret_key, request.session_token, "caller"};
  storage::SignedRequest s = storage::sign_v4(req, creds, request.region, request.service, request.amz_date);
  return {std::move(s.canonical_request), std::move(s.string_to_sign), std::move(s.signature),
          std::move(s.authorization), std::move(s.headers)};
}

std::string sha256_hex(std::string_view data) { return storage::sha256_hex(data); }

}  // namespace mmfeed
