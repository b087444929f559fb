// The fetch engine against a real nginx (nginx_server.h, the config the Python tests use): plain,
// ranged and multipart GETs, final and retried failures, deadlines -- the HTTP paths the sanitizer
// builds (make test-asan, make test-tsan) must see. Faults are deterministic: faulty.lua's
// ?faults=K1,K2 fails the n-th request for a URL in way Kn, and serves every later one. No test
// asserts on timing; each deadline is far (25x or more) from the delay that trips it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "core/metrics.h"
#include "core/trace.h"
#include "nginx_server.h"
#include "storage/fetcher.h"

namespace mmfeed::storage {
namespace {

namespace fs = std::filesystem;

std::string pattern(std::size_t size, unsigned seed) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + i / 251 + seed) & 0xff);
  return s;
}

std::string bytes_of(const FetchResult& r) {
  return std::string(reinterpret_cast<const char*>(r.data->data()), r.data->size());
}

class FetcherHttpTest : public testing::NginxSuite<FetcherHttpTest> {
 public:
  static constexpr const char* kName = "mmfeed-http";

  static void write_objects(const fs::path& objects) {
    std::ofstream(objects / "small.bin", std::ios::binary) << small();
    std::ofstream(objects / "big.bin", std::ios::binary) << big();
  }

 protected:
  static const std::string& small() {
    static const std::string s = pattern(10'000, 1);
    return s;
  }
  static const std::string& big() {
    static const std::string s = pattern(1'000'000, 2);
    return s;
  }

  static std::string url(std::string_view location, std::string_view name) { return server_->url(location, name); }

  // A query parameter that gives a URL a count of requests of its own at faulty.lua.
  static std::string fresh() { return "&run=" + std::to_string(++runs_); }

  // Options whose retries wait a millisecond at most.
  static FetchOptions quick() {
    FetchOptions o;
    o.backoff_base_ms = 1;
    o.backoff_max_ms = 1;
    return o;
  }

  // `uri` fetched alone with `options`: its one result (a failure when none comes within 60 s,
  // which only a hang would miss).
  static FetchResult fetch(const FetchOptions& options, const std::string& uri,
                           std::optional<ByteRange> range = std::nullopt) {
    Fetcher fetcher(options, {});
    EXPECT_TRUE(fetcher.submit({parse_uri(uri).value(), 1, range}));
    fetcher.close();
    auto r = fetcher.next_for(std::chrono::seconds(60));
    if (!r) {
      ADD_FAILURE() << "no result within 60 s for " << uri;
      return FetchResult{};
    }
    return std::move(*r);
  }

  static inline int runs_ = 0;
};

TEST_F(FetcherHttpTest, APlainGetArrivesByteExact) {
  const FetchResult r = fetch(quick(), url("ok", "small.bin"));
  ASSERT_TRUE(r.data.ok()) << r.data.error().to_string();
  EXPECT_EQ(bytes_of(r), small());
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.retries, 0);
}

TEST_F(FetcherHttpTest, ARangedGetArrivesAsTheBytesAsked) {
  const FetchResult r = fetch(quick(), url("ok", "big.bin"), ByteRange{1000, 5000});
  ASSERT_TRUE(r.data.ok()) << r.data.error().to_string();
  EXPECT_EQ(r.http_status, 206);
  EXPECT_EQ(bytes_of(r), big().substr(1000, 5000));
}

TEST_F(FetcherHttpTest, ARangedGetPinnedToItsEtagArrivesAndAnotherVersionIsFinalAtOnce) {
  const FetchResult first = fetch(quick(), url("ok", "big.bin"), ByteRange{0, 4});
  ASSERT_TRUE(first.data.ok()) << first.data.error().to_string();
  ASSERT_FALSE(first.etag.empty());  // nginx's, quoted
  EXPECT_EQ(first.object_size, big().size());
  const auto pinned = [&](std::string etag) {
    Fetcher fetcher(quick(), {});
    EXPECT_TRUE(fetcher.submit({parse_uri(url("ok", "big.bin")).value(), 1, ByteRange{1000, 5000}, std::move(etag)}));
    fetcher.close();
    return fetcher.next_for(std::chrono::seconds(60)).value();
  };
  const FetchResult same = pinned(first.etag);
  ASSERT_TRUE(same.data.ok()) << same.data.error().to_string();
  EXPECT_EQ(bytes_of(same), big().substr(1000, 5000));
  EXPECT_EQ(same.etag, first.etag);
  const FetchResult other = pinned("\"another-version\"");
  ASSERT_FALSE(other.data.ok());
  EXPECT_EQ(other.data.error().code(), ErrorCode::kUnavailable);
  EXPECT_NE(other.data.error().message().find("412"), std::string::npos) << other.data.error().to_string();
  EXPECT_EQ(other.attempts, 1);  // asking again cannot bring that version back
}

TEST_F(FetcherHttpTest, ALargeObjectArrivesInParallelRangedParts) {
  FetchOptions options = quick();
  options.part_size = 250'000;
  const FetchResult r = fetch(options, url("ok", "big.bin"));
  ASSERT_TRUE(r.data.ok()) << r.data.error().to_string();
  EXPECT_EQ(bytes_of(r), big());
  EXPECT_EQ(r.attempts, 4);  // the probe learns the size, three parts follow
}

TEST_F(FetcherHttpTest, A404IsFinalAtOnceAndNamesTheUri) {
  FetchOptions options = quick();
  options.max_attempts = 3;
  const std::string uri = url("status/404", "missing.jpg");
  const FetchResult r = fetch(options, uri);
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(r.data.error().to_string(), uri + ": HTTP 404 (an answer of 10 bytes, not shown)");
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.retries, 0);
}

TEST_F(FetcherHttpTest, AThrottledThenFailingRequestIsRetriedUntilItArrives) {
  FetchOptions options = quick();
  options.max_attempts = 3;
  const FetchResult r = fetch(options, url("faulty", "small.bin") + "?faults=slowdown,500" + fresh());
  ASSERT_TRUE(r.data.ok()) << r.data.error().to_string();
  EXPECT_EQ(bytes_of(r), small());
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.retries, 2);
}

TEST_F(FetcherHttpTest, AThrottledRequestKeepsItsCodeWhenItsAttemptsRunOut) {
  FetchOptions options = quick();
  options.max_attempts = 3;
  const std::string uri = url("status/503", "x.jpg");
  const FetchResult r = fetch(options, uri);
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(r.data.error().to_string(), uri + ": HTTP 503 (an answer of 125 bytes, not shown) (after 3 attempts)");
  EXPECT_EQ(r.attempts, 3);
}

TEST_F(FetcherHttpTest, ATruncatedAndAResetProbeAreRetriedThenThePartsArrive) {
  FetchOptions options = quick();
  options.part_size = 250'000;
  options.max_attempts = 3;
  const FetchResult r = fetch(options, url("faulty", "big.bin") + "?faults=truncate,reset" + fresh());
  ASSERT_TRUE(r.data.ok()) << r.data.error().to_string();
  EXPECT_EQ(bytes_of(r), big());
  EXPECT_EQ(r.retries, 2);
  EXPECT_EQ(r.attempts, 6);
}

TEST_F(FetcherHttpTest, AnObjectThatChangesBetweenPartsFailsAfterItsAttempts) {
  FetchOptions options = quick();
  options.part_size = 250'000;
  options.max_attempts = 2;
  const FetchResult r = fetch(options, url("faulty", "big.bin") + "?wrong=etag");
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(r.data.error().message().rfind("the object changed during the fetch (ETag \"", 0), 0u)
      << r.data.error().to_string();
}

TEST_F(FetcherHttpTest, AContentLengthOverTheObjectLimitIsRefusedBeforeItsBody) {
  FetchOptions options = quick();
  options.max_object_bytes = 1u << 20;
  const std::string uri = url("huge", "declared");
  const FetchResult r = fetch(options, uri);
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(r.data.error().to_string(),
            uri +
                ": object of 107374182400 bytes (Content-Length) exceeds the object size limit of 1048576 bytes "
                "(raise max_object_bytes, --max-object-bytes)");
  EXPECT_EQ(r.attempts, 1);
}

TEST_F(FetcherHttpTest, AFirstByteThatNeverComesTimesOutUnderItsDeadline) {
  FetchOptions options = quick();
  options.first_byte_timeout_ms = 200;  // faulty.lua's "slow" answers after 5 s
  options.max_attempts = 2;
  const std::string uri = url("faulty", "small.bin") + "?faults=slow,slow" + fresh();
  const FetchResult r = fetch(options, uri);
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kTimeout);
  EXPECT_EQ(r.data.error().to_string(),
            uri + ": no response within the first-byte deadline of 200 ms (after 2 attempts)");
  EXPECT_EQ(r.attempts, 2);
}

TEST_F(FetcherHttpTest, AnAttemptPastItsDeadlineTimesOut) {
  FetchOptions options = quick();
  options.attempt_timeout_ms = 200;  // faulty.lua's "stall" sends half the body, then nothing for 5 s
  options.max_attempts = 1;
  const std::string uri = url("faulty", "small.bin") + "?faults=stall" + fresh();
  const FetchResult r = fetch(options, uri);
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kTimeout);
  EXPECT_EQ(r.data.error().message().rfind("timed out: ", 0), 0u) << r.data.error().to_string();
}

// Issue 17 (review of the fetch engine): a request due a hedge in the same deadline check that
// ends its only attempt, finally, was hedged after that failure had freed it. The hedge is due at
// exactly the first-byte deadline: 20 latencies of 1 ms are known, so the hedge waits hedge_min_ms,
// which equals first_byte_timeout_ms, and both tests are `now - start > 200 ms` on the same clock
// reading. faulty.lua's "slow" sends no byte for 5 s, and one attempt allows no retry.
TEST_F(FetcherHttpTest, Issue17AHedgedJobWhoseTransferFailsFinallyIsNotReadAfterItIsFreed) {
  FetchOptions options = quick();
  options.first_byte_timeout_ms = 200;
  options.hedge_quantile = 0.5;
  options.hedge_min_ms = 200;
  options.max_attempts = 1;
  core::MetricsRegistry metrics;
  for (int i = 0; i < 20; ++i) metrics.histogram("fetch.latency_ns").record(1'000'000);
  const std::string uri = url("faulty", "small.bin") + "?faults=slow" + fresh();
  Fetcher fetcher(options, {}, &metrics);
  ASSERT_TRUE(fetcher.submit({parse_uri(uri).value(), 1, std::nullopt}));
  fetcher.close();
  auto r = fetcher.next_for(std::chrono::seconds(60));
  ASSERT_TRUE(r.has_value()) << "no result within 60 s for " << uri;
  ASSERT_FALSE(r->data.ok());
  EXPECT_EQ(r->data.error().to_string(), uri + ": no response within the first-byte deadline of 200 ms");
  EXPECT_EQ(r->attempts, 1);
  EXPECT_FALSE(fetcher.next_for(std::chrono::seconds(60)).has_value());
  EXPECT_EQ(metrics.snapshot().counters["fetch.hedges"], 0);
}

// Issue 31: libcurl followed a 302 to ftp:// (and would to any protocol it was built with).
// nginx's /redirect-ftp/ names an FTP URL where nothing listens: followed, it fails to connect
// (and was retried); refused, the error names the target, once.
TEST_F(FetcherHttpTest, Issue31ARedirectToFtpIsRefusedByNameAndNotRetried) {
  FetchOptions options = quick();
  options.max_attempts = 3;
  const std::string uri = url("redirect-ftp", "x.jpg");
  const FetchResult r = fetch(options, uri);
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.data.error().to_string(),
            uri + ": redirect to ftp://127.0.0.1:1/x refused: only http and https are followed");
  EXPECT_EQ(r.attempts, 1);
}

// Issue 31: an https URL redirected to plain http was followed, giving up the encryption and the
// server's authentication it asked for. The TLS server's /to-http/ sends it to the plain one.
TEST_F(FetcherHttpTest, Issue31ARedirectFromHttpsDownToHttpIsRefused) {
  FetchOptions options = quick();
  options.ca_file = server_->ca_file();
  options.max_attempts = 3;
  const std::string uri = server_->tls_url("to-http", "small.bin");
  const FetchResult r = fetch(options, uri);
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.data.error().to_string(),
            uri + ": redirect to " + url("ok", "small.bin") + " refused: an https URL is followed only to https");
  EXPECT_EQ(r.attempts, 1);
}

TEST_F(FetcherHttpTest, AnHttpsGetArrivesFromTheTlsServer) {
  FetchOptions options = quick();
  options.ca_file = server_->ca_file();
  const FetchResult r = fetch(options, server_->tls_url("ok", "small.bin"));
  ASSERT_TRUE(r.data.ok()) << r.data.error().to_string();
  EXPECT_EQ(bytes_of(r), small());
}

// Issue 31: a presigned URL is a bearer credential; its failure wrote it whole into the error,
// and the trace recorded it for every GET.
TEST_F(FetcherHttpTest, Issue31APresignedUrlsCredentialsAreInNeitherItsErrorNorTheTrace) {
  const std::string query =
      "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDSECRETKEYID%2F20260101%2Fus-east-1%2Fs3%2Faws4_request"
      "&X-Amz-Expires=3600&X-Amz-Security-Token=SECRETTOKEN&X-Amz-Signature=SECRETSIGNATURE";
  const std::string uri = url("status/403", "x.jpg");
  core::TraceWriter trace;
  Fetcher fetcher(quick(), {}, nullptr, &trace);
  ASSERT_TRUE(fetcher.submit({parse_uri(uri + query).value(), 1, std::nullopt}));
  fetcher.close();
  auto r = fetcher.next_for(std::chrono::seconds(60));
  ASSERT_TRUE(r.has_value()) << "no result within 60 s";
  ASSERT_FALSE(r->data.ok());
  const std::string shown = uri +
                            "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED&X-Amz-Expires=3600"
                            "&X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED";
  EXPECT_EQ(r->data.error().to_string(), shown + ": HTTP 403 (an answer of 10 bytes, not shown)");
  EXPECT_EQ(r->uri, shown);
  const std::string json = trace.to_json();
  EXPECT_NE(json.find(shown), std::string::npos) << json;  // the GET is still in the trace
  for (const char* secret : {"SECRETTOKEN", "SECRETSIGNATURE", "AKIDSECRETKEYID"}) {
    EXPECT_EQ(json.find(secret), std::string::npos) << secret << " in " << json;
  }
}

TEST_F(FetcherHttpTest, Issue31APresignedUrlIsFetchedAsGiven) {
  const FetchResult r = fetch(quick(), url("ok", "small.bin") + "?X-Amz-Expires=60&X-Amz-Signature=s");
  ASSERT_TRUE(r.data.ok()) << r.data.error().to_string();
  EXPECT_EQ(bytes_of(r), small());
  EXPECT_EQ(r.uri, url("ok", "small.bin") + "?X-Amz-Expires=60&X-Amz-Signature=REDACTED");
}

// Issue 31 (12): a 2 MiB response header line was reported as "Out of memory" and retried.
// libcurl refuses a header line over CURL_MAX_HTTP_HEADER that way, every time.
TEST_F(FetcherHttpTest, Issue31AHeaderLineOverLibcurlsLimitIsNamedAndNotRetried) {
  FetchOptions options = quick();
  options.max_attempts = 3;
  const std::string uri = url("big-header", "x.jpg");
  const FetchResult r = fetch(options, uri);
  ASSERT_FALSE(r.data.ok());
  EXPECT_EQ(r.data.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(r.data.error().to_string(),
            uri +
                ": response header line over libcurl's limit of 102400 bytes (CURL_MAX_HTTP_HEADER); the answer "
                "cannot be read");
  EXPECT_EQ(r.attempts, 1);
}

}  // namespace
}  // namespace mmfeed::storage
