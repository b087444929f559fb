#include "storage/classify.h"

#include <gtest/gtest.h>

#include "storage/curl_easy.h"

namespace mmfeed::storage {
namespace {

const std::string kUri = "http://127.0.0.1:8080/ok/a.jpg";
const std::string kSlowDown =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
    "<Message>Please reduce your request rate.</Message></Error>";

Error http(long status, std::string_view body = "") {
  return classify_http_status(status, {.body = body, .bytes = body.size()}, nullptr, kUri);
}

Error s3_status(long status, std::string_view body) {
  const S3Options s3;
  return classify_http_status(status, {.body = body, .bytes = body.size()}, &s3, "s3://b/k.jpg");
}

TEST(ClassifyHttpStatusTest, Http404IsNotFoundAndFinal) {
  const Error e = http(404);
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_FALSE(is_retryable(e.code()));
  EXPECT_EQ(e.to_string(), kUri + ": HTTP 404");
}

TEST(ClassifyHttpStatusTest, Http403IsPermissionDeniedAndFinal) {
  const Error e = http(403);
  EXPECT_EQ(e.code(), ErrorCode::kPermissionDenied);
  EXPECT_FALSE(is_retryable(e.code()));
  EXPECT_EQ(e.to_string(), kUri + ": HTTP 403");
}

TEST(ClassifyHttpStatusTest, Http403FromS3SaysWhatToCheck) {
  S3Options s3;
  s3.region = "eu-west-1";
  s3.credentials.access_key_id = "AKIDEXAMPLE";
  s3.credentials.source = "environment";
  const Error e = classify_http_status(403, {}, &s3, "s3://b/k.jpg");
  EXPECT_EQ(e.code(), ErrorCode::kPermissionDenied);
  EXPECT_EQ(e.message(),
            "HTTP 403 (check the credentials [access key AKIDEXAMPLE, from environment], the region [eu-west-1] and "
            "the endpoint [AWS])");
}

TEST(ClassifyHttpStatusTest, Http429IsUnavailableAndRetryable) {
  const Error e = http(429);
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(is_retryable(e.code()));
}

TEST(ClassifyHttpStatusTest, Http500IsUnavailableAndRetryable) {
  const Error e = http(500);
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(is_retryable(e.code()));
  EXPECT_EQ(e.message(), "HTTP 500");
}

TEST(ClassifyHttpStatusTest, Http503SlowDownIsRetryableAndCarriesS3sSentence) {
  const Error e = s3_status(503, kSlowDown);
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  EXPECT_TRUE(is_retryable(e.code()));
  EXPECT_EQ(e.message(), "HTTP 503 SlowDown: Please reduce your request rate.");
}

TEST(ClassifyHttpStatusTest, Issue48AnHttpAnswersBodyIsNeverQuotedOnlyItsSize) {
  // An internal service named by a remote manifest: its error page, S3-shaped or not, stays out
  // of the error; the same document from an S3 request is read.
  const std::string secret = "<Error><Code>InternalToken</Code><Message>db password hunter2</Message></Error>";
  for (const std::string& body : {secret, std::string("stack trace: token=abc")}) {
    const Error e = http(500, body);
    EXPECT_EQ(e.message(), "HTTP 500 (an answer of " + std::to_string(body.size()) + " bytes, not shown)");
  }
  EXPECT_EQ(s3_status(500, secret).message(), "HTTP 500 InternalToken: db password hunter2");
}

TEST(ClassifyHttpStatusTest, Http501And505AreFinal) {
  EXPECT_EQ(http(501).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(http(505).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(is_retryable(http(501).code()));
}

TEST(ClassifyHttpStatusTest, Http412SaysTheObjectChangedAndIsRetryable) {
  const Error e = http(412);
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(e.message(), "HTTP 412 (the object changed during the fetch)");
}

TEST(ClassifyHttpStatusTest, Http416IsOutOfRange) { EXPECT_EQ(http(416).code(), ErrorCode::kOutOfRange); }

TEST(ClassifyHttpStatusTest, AnotherClientErrorIsFinal) {
  EXPECT_EQ(http(400).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(http(408).code(), ErrorCode::kUnavailable);  // a request timeout: try again
}

TEST(ClassifyCurlFailureTest, ATimeoutIsATimeoutAndRetryable) {
  const Error e = classify_curl_failure(
      {.code = CURLE_OPERATION_TIMEDOUT, .detail = "Operation timed out after 500 milliseconds"}, kUri);
  EXPECT_EQ(e.code(), ErrorCode::kTimeout);
  EXPECT_TRUE(is_retryable(e.code()));
  EXPECT_EQ(e.to_string(), kUri + ": timed out: Operation timed out after 500 milliseconds");
}

TEST(ClassifyCurlFailureTest, ARefusedConnectionIsARetryableIoError) {
  const Error e = classify_curl_failure({.code = CURLE_COULDNT_CONNECT, .detail = "Connection refused"}, kUri);
  EXPECT_EQ(e.code(), ErrorCode::kIoError);
  EXPECT_TRUE(is_retryable(e.code()));
  EXPECT_EQ(e.message(), "Connection refused");
}

TEST(ClassifyCurlFailureTest, AMalformedUrlIsFinal) {
  const Error e = classify_curl_failure({.code = CURLE_URL_MALFORMAT, .detail = "URL rejected"}, kUri);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(is_retryable(e.code()));
}

TEST(ClassifyCurlFailureTest, ARedirectLoopIsFinalAndNamesWhereItEnded) {
  const Error e = classify_curl_failure(
      {.code = CURLE_TOO_MANY_REDIRECTS, .detail = "Maximum (5) redirects followed", .last_url = "http://h/loop/x"},
      kUri);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message(), "redirect loop: more than 5 redirects, the last to http://h/loop/x");
}

TEST(ClassifyCurlFailureTest, Issue31ARedirectLoopsTargetIsRedacted) {
  const Error e = classify_curl_failure(
      {.code = CURLE_TOO_MANY_REDIRECTS, .detail = "Maximum (5) redirects followed", .last_url = "http://h/x?sig=s"},
      kUri);
  EXPECT_EQ(e.message(), "redirect loop: more than 5 redirects, the last to http://h/x?sig=REDACTED");
}

TEST(ClassifyCurlFailureTest, Issue31ARedirectToAProtocolNotAllowedIsFinalAndNamesItsTarget) {
  const Error e = classify_curl_failure({.code = CURLE_UNSUPPORTED_PROTOCOL,
                                         .detail = "Protocol \"ftp\" not supported or disabled in libcurl",
                                         .last_url = "ftp://u:p@h/x",
                                         .redirects = 1},
                                        kUri);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(is_retryable(e.code()));
  EXPECT_EQ(e.message(), "redirect to ftp://REDACTED@h/x refused: only http and https are followed");
}

TEST(ClassifyCurlFailureTest, Issue31ARedirectFromHttpsToHttpSaysHttpsStaysHttps) {
  const Error e = classify_curl_failure({.code = CURLE_UNSUPPORTED_PROTOCOL,
                                         .detail = "Protocol \"http\" not supported or disabled in libcurl",
                                         .last_url = "http://h/x",
                                         .redirects = 2},
                                        "https://h/a.jpg");
  EXPECT_EQ(e.to_string(), "https://h/a.jpg: redirect to http://h/x refused: an https URL is followed only to https");
}

TEST(ClassifyCurlFailureTest, Issue31OutOfMemoryInTheHeadersIsAHeaderOverLibcurlsLimitAndFinal) {
  const Error e =
      classify_curl_failure({.code = CURLE_OUT_OF_MEMORY, .detail = "Out of memory", .in_headers = true}, kUri);
  EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
  EXPECT_FALSE(is_retryable(e.code()));
  EXPECT_EQ(e.message(),
            "response header line over libcurl's limit of 102400 bytes (CURL_MAX_HTTP_HEADER); the answer cannot be "
            "read");
}

TEST(ClassifyCurlFailureTest, Issue31LibcurlsErrorTextIsRedacted) {
  const Error e =
      classify_curl_failure({.code = CURLE_COULDNT_CONNECT, .detail = "cannot reach https://h/?token=t"}, kUri);
  EXPECT_EQ(e.message(), "cannot reach https://h/?token=REDACTED");
}

TEST(RedirectProtocolsTest, Issue31AnHttpsUrlIsRedirectedOnlyToHttps) {
  EXPECT_STREQ(redirect_protocols("https://h/a.jpg"), "https");
  EXPECT_STREQ(redirect_protocols("HTTPS://h/a.jpg"), "https");
  EXPECT_STREQ(redirect_protocols("http://h/a.jpg"), "http,https");
}

TEST(ClassifyCurlFailureTest, AnUntrustedCertificateIsFinalAndSaysHowToTrustIt) {
  const Error e =
      classify_curl_failure({.code = CURLE_PEER_FAILED_VERIFICATION, .detail = "self-signed certificate"}, kUri);
  EXPECT_EQ(e.code(), ErrorCode::kPermissionDenied);
  EXPECT_FALSE(is_retryable(e.code()));
  EXPECT_EQ(e.message(),
            "TLS certificate not trusted: self-signed certificate (give the CA bundle: --ca-bundle or AWS_CA_BUNDLE)");
}

TEST(ClassifyCurlFailureTest, ATruncatedBodySaysHowMuchArrived) {
  const Error e = classify_curl_failure(
      {.code = CURLE_PARTIAL_FILE, .detail = "transfer closed", .received = 500, .content_length = 1000}, kUri);
  EXPECT_EQ(e.code(), ErrorCode::kIoError);
  EXPECT_TRUE(is_retryable(e.code()));
  EXPECT_EQ(e.message(), "truncated body: 500 of 1000 bytes (transfer closed)");
}

TEST(ClassifyCurlFailureTest, ATruncatedBodyOfUnknownLength) {
  const Error e = classify_curl_failure({.code = CURLE_PARTIAL_FILE, .detail = "closed", .received = 7}, kUri);
  EXPECT_EQ(e.message(), "truncated body: 7 of ? bytes (closed)");
}

TEST(ClassifyRefusalTest, ARefusalKeepsItsCodeAndMessage) {
  const Error e =
      classify_refusal(Refusal{ErrorCode::kResourceExhausted, "object too large", false}, CURLE_WRITE_ERROR, kUri);
  EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
  EXPECT_FALSE(is_retryable(e.code()));
  EXPECT_EQ(e.to_string(), kUri + ": object too large");
}

TEST(ClassifyRefusalTest, ATransferStoppedForADeadlineIsATimeout) {
  const Error e =
      classify_refusal(Refusal{.message = "stalled: no data for 10 ms after 5 bytes"}, CURLE_OPERATION_TIMEDOUT, kUri);
  EXPECT_EQ(e.code(), ErrorCode::kTimeout);
  EXPECT_EQ(e.message(), "stalled: no data for 10 ms after 5 bytes");
}

}  // namespace
}  // namespace mmfeed::storage
