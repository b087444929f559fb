// Error classification: how a GET that failed becomes an Error naming its URI, with the code
// that decides whether it is tried again (is_retryable: timeouts, throttling, 5xx and network
// failures are; 404, 403, a redirect loop, an untrusted certificate and an object over the size
// limit are final). Pure functions of what the transfer ended with; the fetch engine calls them on
// its I/O thread when a transfer finishes.
//
// Example:
//   classify_http_status(404, {}, nullptr, "http://h/a.jpg").to_string()  // "http://h/a.jpg: HTTP 404"
//   classify_curl_failure({.code = CURLE_OPERATION_TIMEDOUT, .detail = "..."}, uri).code()  // kTimeout
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "mmfeed/error.h"
#include "storage/credentials.h"
#include "storage/response.h"

namespace mmfeed::storage {

// A transfer that libcurl ended with an error, as the engine saw it.
struct CurlFailure {
  CURLcode code = CURLE_OK;
  std::string_view detail;         // libcurl's error buffer, or curl_easy_strerror(code) when it is empty
  const char* last_url = nullptr;  // the URL it ended at (CURLINFO_EFFECTIVE_URL): a redirect's target; null if unknown
  long redirects = 0;              // redirects followed before it ended (CURLINFO_REDIRECT_COUNT)
  bool in_headers = false;         // it ended before the answer's headers did
  std::uint64_t received = 0;      // body bytes received, for a truncated body
  std::uint64_t content_length = kUnknown;
};

// The Error for a transfer libcurl failed: kTimeout for its deadline; kInvalidArgument for a
// malformed URL, an unsupported scheme, a redirect to a protocol other than http(s) or from https
// down to http (naming its target), or a redirect loop; kPermissionDenied for an untrusted TLS
// certificate (saying how to trust it); kResourceExhausted for libcurl out of memory -- in the
// headers, a header line over libcurl's limit; kIoError (retryable) for everything else, a
// truncated body included. URLs in the message are redacted (redact.h).
Error classify_curl_failure(const CurlFailure& failure, const std::string& uri);

// A non-2xx answer's body: how many bytes came, and the first of them where they are read.
struct ErrorAnswer {
  std::string_view body;    // kept only from S3 requests, for their error document
  std::uint64_t bytes = 0;  // the whole body's size
};

// The Error for a non-2xx answer: "HTTP <status>", followed, for an S3 request (`s3` given), by
// S3's error code and sentence when the body is an S3 <Error> document. Any other answer's body
// is never quoted, only its size: a manifest may point at an internal service whose error page
// holds what its reader must not see (issue 48). 404 is kNotFound; 401/403 kPermissionDenied (with what to check
// when `s3` is given, i.e. the URI is an S3 one); 408, 429, 503 and other 5xx kUnavailable; 412
// kUnavailable saying the object changed; 416 kOutOfRange; 501, 505 and other 4xx kInvalidArgument.
Error classify_http_status(long status, const ErrorAnswer& answer, const S3Options* s3, const std::string& uri);

// The Error for a transfer the engine stopped itself (a refused answer, a deadline): the
// refusal's code and message, but kTimeout when it was stopped for a deadline (`code` is
// CURLE_OPERATION_TIMEDOUT).
Error classify_refusal(const Refusal& refusal, CURLcode code, const std::string& uri);

}  // namespace mmfeed::storage
