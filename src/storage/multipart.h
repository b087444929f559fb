// Multipart planning: which bytes each GET of an object asks for, and where a checked answer's
// body goes. The first GET of an object (the probe) asks for part_size bytes; an answer that
// reveals a larger object makes the whole object's buffer and the remaining parts, fetched as
// parallel ranged GETs. Pure arithmetic; the fetch engine (fetch_engine.h) acts on it on its I/O
// thread.
//
// Example:
//   probe_range(1000)                        // bytes=0-999
//   part_count(2500, 1000)                   // 3
//   part_range(2, 1000, 2500)                // bytes=2000-2499
//   range_header(part_range(2, 1000, 2500))  // "bytes=2000-2499"
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "storage/fetcher.h"
#include "storage/response.h"

namespace mmfeed::storage {

// The range of a request that names its bytes: `range.length` bytes from `range.offset` (one byte
// when the length is 0: a Range header cannot ask for none).
AskedRange requested_range(const ByteRange& range);

// The probe's range: the first `part_size` bytes (part_size > 0).
AskedRange probe_range(std::uint64_t part_size);

// The range of part `part` of an object of `total` bytes cut in `part_size` pieces (the last one
// shorter). Precondition: part < part_count(total, part_size).
AskedRange part_range(std::size_t part, std::uint64_t part_size, std::uint64_t total);

// How many parts of `part_size` bytes hold `total` bytes (part_size > 0).
std::size_t part_count(std::uint64_t total, std::uint64_t part_size);

// The Range header's value for `range` ("bytes=0-99"). Precondition: range.end != kUnknown.
std::string range_header(const AskedRange& range);

// Where the body of a 2xx answer that is not a later part goes.
struct BodyPlan {
  enum class Kind {
    kParts,  // a probe's 206 for an object larger than a part: buffer the whole object, GET the rest in parts
    kWhole,  // a body of known length: one buffer of that length
    kGrow,   // no length declared (chunked, or ended by closing the connection): a buffer that grows
  };
  Kind kind = Kind::kGrow;
  std::uint64_t bytes = 0;       // kParts: the object's size; kWhole: the body's; kGrow: 0
  std::size_t parts = 0;         // kParts: how many (the probe's answer fills part 0)
  const char* declared_by = "";  // which header declared `bytes`, for check_object_size's message
};

// The plan for an answer checked by check_answer; `probe` when the GET was the probe. The caller
// still checks `bytes` against the object size limit.
BodyPlan plan_body(const ResponseHeaders& headers, bool probe, std::uint64_t part_size);

}  // namespace mmfeed::storage
