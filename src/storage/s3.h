// S3 request addressing and responses: where a GET for s3://bucket/key goes, how it is
// signed, and what S3's XML answers (ListObjectsV2 pages, error documents) say.
//
// Example:
//   S3Options s3 = ...;
//   HttpRequest req = s3_get_request(s3, "bucket", "train/cat 1.jpg", {{"range", "bytes=0-99"}});
//   // req.url  = "https://bucket.s3.us-east-1.amazonaws.com/train/cat%201.jpg"
//   // req.headers: Host, Range, x-amz-date, x-amz-content-sha256, Authorization
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mmfeed/error.h"
#include "storage/credentials.h"

namespace mmfeed::storage {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string url;
  HeaderList headers;  // every header to send, Host included
};

// A GET (or any method) of bucket/key, signed unless the options are anonymous or hold no
// credentials. `query` pairs are raw; `extra_headers` are signed too.
HttpRequest s3_request(const S3Options& options, std::string_view method, std::string_view bucket, std::string_view key,
                       const HeaderList& query = {}, const HeaderList& extra_headers = {});

// Whether requests for `bucket` use path-style addressing under `options`.
bool uses_path_style(const S3Options& options, std::string_view bucket);

// What to check after a 401/403 from S3: " (check the credentials [access key AKIA..., from
// environment], the region [us-east-1] and the endpoint [AWS])" -- the key id and its source,
// never the secret.
std::string permission_hint(const S3Options& options);

struct S3Object {
  std::string key;
  std::uint64_t size = 0;
  std::string etag;
  std::string last_modified;
};

struct ListPage {
  std::vector<S3Object> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_continuation_token;
};

// Parses a ListObjectsV2 response body (ListBucketResult). kCorruptData on malformed XML or a
// truncated page without a continuation token.
Result<ListPage> parse_list_objects_v2(std::string_view xml);

struct S3ErrorDocument {
  std::string code;     // "NoSuchKey", "SlowDown", "SignatureDoesNotMatch"
  std::string message;  // S3's sentence
};

// Parses an <Error> document; nullopt when the body is not one (an nginx page, empty).
std::optional<S3ErrorDocument> parse_s3_error(std::string_view xml);

}  // namespace mmfeed::storage
