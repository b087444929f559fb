// URI redaction: what a URI looks like wherever mmfeed shows it -- errors, errors(), exceptions,
// `mmfeed run` and `mmfeed fetch` reports, traces, the resume state's fingerprint. A presigned
// URL's signature and security token, and a URL's user:password@, are bearer credentials: anyone
// who reads a log line that holds them can fetch what they grant. They are replaced by a marker;
// everything else a user needs to debug (host, path, X-Amz-Expires, versionId) stays.
//
// The fetch itself uses the URI's parsed fields (ObjectUri::url, bucket, key); only what is shown is
// redacted (ObjectUri::to_string).
// Redaction is idempotent: a redacted URI redacts to itself.
//
// Example:
//   redact_uri("https://u:p@h/k.jpg?X-Amz-Expires=60&X-Amz-Signature=ab12")
//       // "https://REDACTED@h/k.jpg?X-Amz-Expires=60&X-Amz-Signature=REDACTED"
//   redact_uris_in("GET https://h/k?token=t1 failed")   // "GET https://h/k?token=REDACTED failed"
#pragma once

#include <string>
#include <string_view>

namespace mmfeed::storage {

// What replaces a credential.
inline constexpr std::string_view kRedacted = "REDACTED";

// Whether a query (or fragment) parameter of this name carries a credential: the names AWS, GCS
// and Azure presigned URLs and OAuth use (X-Amz-Signature, X-Amz-Security-Token, X-Amz-Credential,
// Signature, AWSAccessKeyId, X-Goog-Signature, X-Goog-Credential, sig, key, token, access_token,
// ...), and any name containing token, signature, credential, secret, password, passwd, apikey,
// api_key or auth. `name` is matched percent-decoded and without regard to case.
bool is_credential_parameter(std::string_view name);

// `uri` with its userinfo (user:password@) and the values of its credential parameters (in the
// query and in the fragment) replaced by kRedacted. Text without "://" (a local path) is returned
// unchanged.
std::string redact_uri(std::string_view uri);

// `text` with every URL in it ("scheme://...", up to whitespace, a quote, '<' or '>', less
// trailing punctuation such as the ':' of "URL: message") redacted by redact_uri: for messages
// that quote URLs from elsewhere -- libcurl's error text, a manifest's raw strings, a sample id.
std::string redact_uris_in(std::string_view text);

}  // namespace mmfeed::storage
