// AWS Signature Version 4, computed by us (curl 7.88's CURLOPT_AWS_SIGV4 does not canonicalise
// queries or encode paths correctly).
//
// S3 flavour: the path is encoded once and never normalised; the payload hash is
// UNSIGNED-PAYLOAD for GETs (the header x-amz-content-sha256 carries it).
//
// Example:
//   SigningRequest req{.method = "GET", .host = "bucket.s3.us-east-1.amazonaws.com",
//                      .path = "/train/cat 1.jpg"};
//   SignedRequest signed_req = sign_v4(req, credentials, "us-east-1", "s3", amz_date_now());
//   for (auto& [name, value] : signed_req.headers) add_header(name + ": " + value);
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/credentials.h"

namespace mmfeed::storage {

inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kEmptyPayloadSha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct SigningRequest {
  std::string method = "GET";
  std::string host;  // the Host header: "bucket.s3.amazonaws.com" or "127.0.0.1:9000"
  std::string path;  // raw (decoded) path, starting with '/'; encoded here, slashes kept
  std::vector<std::pair<std::string, std::string>> query;    // raw names and values
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers to sign (Range...)
  std::string payload_hash = std::string(kUnsignedPayload);
  bool add_content_sha256_header = true;  // S3 wants x-amz-content-sha256; other services don't
};

struct SignedRequest {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;
  std::string authorization;
  // Every header to send, Authorization included, in canonical order of names.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Signs `request` at `amz_date` ("20130524T000000Z").
SignedRequest sign_v4(const SigningRequest& request, const Credentials& credentials, std::string_view region,
                      std::string_view service, std::string_view amz_date);

// The canonical query string: names and values encoded, sorted by name then value.
std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query);

// "YYYYMMDDTHHMMSSZ" for a UTC time point.
std::string amz_date(std::chrono::system_clock::time_point t);
inline std::string amz_date_now() { return amz_date(std::chrono::system_clock::now()); }

std::string sha256_hex(std::string_view data);
std::string hmac_sha256(std::string_view key, std::string_view data);  // raw 32 bytes
std::string hex(std::string_view bytes);

}  // namespace mmfeed::storage
