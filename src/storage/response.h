// What an HTTP answer to one GET says, and whether it is the answer that was asked for: its
// header lines parsed, a 2xx answer checked against the range and version asked before memory is
// committed for its body, and the body checked against the length announced once it has ended.
// Pure functions over values: the fetch engine (fetch_engine.h) calls them from libcurl's
// callbacks on its I/O thread, the tests call them alone.
//
// Example:
//   ResponseHeaders h;
//   parse_header_line("HTTP/1.1 206 Partial Content\r\n", h);
//   parse_header_line("Content-Range: bytes 0-99/1000\r\n", h);
//   parse_header_line("\r\n", h);                                 // HeaderLine::kEnd
//   check_answer(h, AskedRange{0, 99}, std::nullopt);             // nullopt: the bytes asked
//   check_answer(h, AskedRange{100, 199}, std::nullopt)->message  // "206 answer for other bytes than asked (...)"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mmfeed/error.h"

namespace mmfeed::storage {

// A byte count or offset that no header gave (or a range without an end).
inline constexpr std::uint64_t kUnknown = UINT64_MAX;

// The bytes one GET asks for: bytes=begin-end, `end` inclusive; end == kUnknown sends no Range
// header (the whole object).
struct AskedRange {
  std::uint64_t begin = 0;
  std::uint64_t end = kUnknown;
};

// The header fields of the last response of a transfer (a redirect or a 100 Continue starts a new
// one); kUnknown where the field is missing or not a number.
struct ResponseHeaders {
  long status = 0;
  std::uint64_t content_length = kUnknown;
  std::uint64_t range_first = kUnknown;  // Content-Range: bytes FIRST-LAST/TOTAL
  std::uint64_t range_last = kUnknown;
  std::uint64_t range_total = kUnknown;
  std::string etag;    // as sent, quotes included
  bool ended = false;  // the empty line that ends the headers was seen
};

// Why the engine refuses an answer (or stops a transfer) itself, before libcurl would.
struct Refusal {
  ErrorCode code = ErrorCode::kIoError;
  std::string message;
  bool object_changed = false;  // a part came from another version of the object than the probe
};

// What a part of a large object must match: the size and the ETag its probe learned.
struct PartExpectation {
  std::uint64_t total = 0;
  std::string_view etag;  // empty: the probe's answer had none, any is accepted
};

enum class HeaderLine {
  kStatusLine,  // "HTTP/1.1 200 OK": a new response, `headers` reset to it
  kField,       // "Name: value" (taken when it is one of the fields above, else ignored)
  kEnd,         // the empty line that ends the headers (`ended` set)
  kOther,       // anything else (ignored)
};

// Folds one header line, as libcurl hands it over (CRLF included), into `headers`; says what the
// line was. Names are matched without regard to case, values trimmed.
HeaderLine parse_header_line(std::string_view line, ResponseHeaders& headers);

// Checks a 2xx answer against what was asked, at the end of its headers: a 206 must carry a
// Content-Range for exactly the bytes asked (clipped to the object's end) and a Content-Length
// that agrees with it, and a part (`part` given) must be a 206 of the probe's object size and
// ETag; otherwise the bytes would land at the wrong offset or mix two versions of the object.
// nullopt when the answer is the one asked for; else a kIoError refusal naming what was asked and
// what came, or, for another ETag, a kUnavailable one with object_changed set (the fetch starts
// over).
std::optional<Refusal> check_answer(const ResponseHeaders& headers, const AskedRange& asked,
                                    const std::optional<PartExpectation>& part);

// Refuses, with kResourceExhausted, a body of `bytes` (as `declared_by` declares it: "Content-Length",
// "Content-Range total", ...) over `max_object_bytes`; nullopt when it fits.
std::optional<Refusal> check_object_size(std::uint64_t bytes, std::string_view declared_by,
                                         std::uint64_t max_object_bytes, std::string_view option);

// "(raise OPTION, --OPTION)": what a size refusal tells the user, `option` the one that set the limit.
std::string raise_hint(std::string_view option);

// Checks a 2xx body that ended without a transfer error: `received` bytes against the
// Content-Length, and a part's bytes against the `expected` size of its range. A kIoError naming
// `uri` ("truncated body: 500 of 1000 bytes") when short or long; nullopt when complete.
std::optional<Error> check_body_complete(const ResponseHeaders& headers, std::uint64_t received, bool part,
                                         std::uint64_t expected, const std::string& uri);

}  // namespace mmfeed::storage
