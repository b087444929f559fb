// Object URIs: what a manifest may point at, parsed once and checked at parse time.
//
//   images/cat.jpg, /data/cat.jpg, file:///data/cat.jpg   local files (relative paths resolve
//                                                          against the manifest's directory)
//   http://host/path, https://host/path                    plain HTTP(S) GETs
//   s3://bucket/key                                        S3 or an S3-compatible store
//
// Example:
//   auto uri = parse_uri("s3://my-bucket/train/00017.jpg");
//   if (uri.ok()) use(uri->bucket, uri->key);            // "my-bucket", "train/00017.jpg"
//   parse_uri("gs://b/k").error().to_string();            // "gs://b/k: unsupported URI scheme 'gs' ..."
#pragma once

#include <string>
#include <string_view>

#include "mmfeed/error.h"

namespace mmfeed::storage {

enum class Scheme { kFile, kHttp, kHttps, kS3 };

std::string_view scheme_name(Scheme scheme);

struct ObjectUri {
  Scheme scheme = Scheme::kFile;
  std::string path;    // kFile: absolute, lexically normalised path
  std::string url;     // kHttp/kHttps: the URL as given
  std::string bucket;  // kS3
  std::string key;     // kS3: the raw (decoded) key; may be empty for a bucket-level prefix

  // The canonical spelling, as shown in messages and traces: "s3://bucket/key", "file:///abs/path",
  // or the URL, with its credentials redacted (redact.h). Fetches use the fields, never this.
  std::string to_string() const;

  bool operator==(const ObjectUri&) const = default;
};

// Parses `text`. Relative paths resolve against `base_dir` (or the working directory when it
// is empty). Errors (kInvalidArgument) name the URI (redacted, control bytes as \xNN) and the
// reason: unknown scheme, missing bucket, empty path, a file:// URL with a remote host, bad
// percent-escapes, a NUL byte anywhere (a JSON "\u0000" would cut the name short where the
// operating system or libcurl reads it), whitespace or another control byte in a URL.
Result<ObjectUri> parse_uri(std::string_view text, std::string_view base_dir = {});

// Percent-encodes `s` by the SigV4/S3 rules: unreserved bytes (A-Z a-z 0-9 - _ . ~) stay,
// '/' stays when `keep_slash`, every other byte becomes %XX (upper-case hex).
std::string uri_encode(std::string_view s, bool keep_slash);

// Decodes %XX escapes; kInvalidArgument on a malformed escape.
Result<std::string> percent_decode(std::string_view s);

}  // namespace mmfeed::storage
