#include "storage/classify.h"

#include "core/strings.h"
#include "storage/curl_easy.h"
#include "storage/redact.h"
#include "storage/s3.h"

namespace mmfeed::storage {

Error classify_curl_failure(const CurlFailure& f, const std::string& uri) {
  const std::string detail = redact_uris_in(f.detail);  // libcurl may quote the URL
  switch (f.code) {
    case CURLE_OPERATION_TIMEDOUT: return Error(ErrorCode::kTimeout, "timed out: " + detail, uri);
    case CURLE_UNSUPPORTED_PROTOCOL:
      if (f.redirects > 0 && f.last_url != nullptr) {  // refused by CURLOPT_REDIR_PROTOCOLS_STR
        const std::string target = redact_uri(f.last_url);
        const bool downgrade = core::ascii_lower(target.substr(0, 7)) == "http://";
        return Error(ErrorCode::kInvalidArgument,
                     "redirect to " + target + " refused: " +
                         (downgrade ? "an https URL is followed only to https" : "only http and https are followed"),
                     uri);
      }
      [[fallthrough]];
    case CURLE_URL_MALFORMAT: return Error(ErrorCode::kInvalidArgument, detail, uri);
    case CURLE_TOO_MANY_REDIRECTS:  // a loop: following it again ends the same way
      return Error(ErrorCode::kInvalidArgument,
                   "redirect loop: more than " + std::to_string(kMaxRedirects) + " redirects" +
                       (f.last_url != nullptr ? ", the last to " + redact_uri(f.last_url) : std::string()),
                   uri);
    case CURLE_OUT_OF_MEMORY:
      // libcurl's only limit in the headers: CURL_MAX_HTTP_HEADER per line, refused as out of
      // memory (with no text). The same answer comes again: not retried.
      if (f.in_headers) {
        return Error(ErrorCode::kResourceExhausted,
                     "response header line over libcurl's limit of " + std::to_string(CURL_MAX_HTTP_HEADER) +
                         " bytes (CURL_MAX_HTTP_HEADER); the answer cannot be read",
                     uri);
      }
      return Error(ErrorCode::kResourceExhausted, "libcurl ran out of memory: " + detail, uri);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
      return Error(ErrorCode::kPermissionDenied,
                   "TLS certificate not trusted: " + detail + " (give the CA bundle: --ca-bundle or AWS_CA_BUNDLE)",
                   uri);
    case CURLE_PARTIAL_FILE:
      return Error(ErrorCode::kIoError,
                   "truncated body: " + std::to_string(f.received) + " of " +
                       (f.content_length == kUnknown ? std::string("?") : std::to_string(f.content_length)) +
                       " bytes (" + detail + ")",
                   uri);
    default: return Error(ErrorCode::kIoError, detail, uri);
  }
}

Error classify_http_status(long status, const ErrorAnswer& answer, const S3Options* s3, const std::string& uri) {
  std::string message = "HTTP " + std::to_string(status);
  if (s3 == nullptr) {
    if (answer.bytes > 0) message += " (an answer of " + std::to_string(answer.bytes) + " bytes, not shown)";
  } else if (auto doc = parse_s3_error(answer.body)) {
    message += " " + doc->code;
    if (!doc->message.empty()) message += ": " + doc->message;
  }
  switch (status) {
    case 404: return Error(ErrorCode::kNotFound, message, uri);
    case 401:
    case 403:
      if (s3 == nullptr) return Error(ErrorCode::kPermissionDenied, message, uri);
      return Error(ErrorCode::kPermissionDenied, message + permission_hint(*s3), uri);
    case 408:
    case 429:
    case 503: return Error(ErrorCode::kUnavailable, message, uri);
    case 412: return Error(ErrorCode::kUnavailable, message + " (the object changed during the fetch)", uri);
    case 416: return Error(ErrorCode::kOutOfRange, message, uri);
    case 501:  // Not Implemented, HTTP Version Not Supported: asking again changes nothing
    case 505: return Error(ErrorCode::kInvalidArgument, message, uri);
    default:
      if (status >= 500) return Error(ErrorCode::kUnavailable, message, uri);
      return Error(ErrorCode::kInvalidArgument, message, uri);
  }
}

Error classify_refusal(const Refusal& refusal, CURLcode code, const std::string& uri) {
  return Error(code == CURLE_OPERATION_TIMEDOUT ? ErrorCode::kTimeout : refusal.code, refusal.message, uri);
}

}  // namespace mmfeed::storage
