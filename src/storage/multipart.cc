#include "storage/multipart.h"

#include <algorithm>

namespace mmfeed::storage {

AskedRange requested_range(const ByteRange& range) {
  return {range.offset, range.offset + std::max<std::uint64_t>(range.length, 1) - 1};
}

AskedRange probe_range(std::uint64_t part_size) { return {0, part_size - 1}; }

AskedRange part_range(std::size_t part, std::uint64_t part_size, std::uint64_t total) {
  const std::uint64_t begin = static_cast<std::uint64_t>(part) * part_size;
  return {begin, std::min<std::uint64_t>(total, begin + part_size) - 1};
}

std::size_t part_count(std::uint64_t total, std::uint64_t part_size) {
  return static_cast<std::size_t>((total + part_size - 1) / part_size);
}

std::string range_header(const AskedRange& range) {
  return "bytes=" + std::to_string(range.begin) + "-" + std::to_string(range.end);
}

BodyPlan plan_body(const ResponseHeaders& headers, bool probe, std::uint64_t part_size) {
  if (probe && headers.status == 206 && headers.range_total > part_size) {
    return {.kind = BodyPlan::Kind::kParts,
            .bytes = headers.range_total,
            .parts = part_count(headers.range_total, part_size),
            .declared_by = "Content-Range total"};
  }
  if (headers.content_length != kUnknown) {
    return {.kind = BodyPlan::Kind::kWhole, .bytes = headers.content_length, .declared_by = "Content-Length"};
  }
  return {};
}

}  // namespace mmfeed::storage
