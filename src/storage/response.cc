#include "storage/response.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "core/strings.h"

namespace mmfeed::storage {

namespace {

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// "bytes FIRST-LAST/TOTAL"; a field that does not parse stays kUnknown.
void parse_content_range(std::string_view value, ResponseHeaders& headers) {
  const auto space = value.find(' ');
  const auto dash = value.find('-');
  const auto slash = value.find('/');
  if (space == std::string_view::npos || dash == std::string_view::npos || slash == std::string_view::npos) return;
  headers.range_first = parse_u64(value.substr(space + 1, dash - space - 1)).value_or(kUnknown);
  headers.range_last = parse_u64(value.substr(dash + 1, slash - dash - 1)).value_or(kUnknown);
  headers.range_total = parse_u64(value.substr(slash + 1)).value_or(kUnknown);
}

// `what`, then what was asked and what came, for an answer for other bytes than asked.
Refusal mismatch(const std::string& what, const ResponseHeaders& h, const AskedRange& asked) {
  return Refusal{.code = ErrorCode::kIoError,
                 .message = what + " (asked bytes=" + std::to_string(asked.begin) + "-" +
                            (asked.end == kUnknown ? std::string() : std::to_string(asked.end)) + ", got status " +
                            std::to_string(h.status) +
                            (h.range_first == kUnknown
                                 ? ", no usable Content-Range)"
                                 : ", Content-Range bytes " + std::to_string(h.range_first) + "-" +
                                       std::to_string(h.range_last) + "/" + std::to_string(h.range_total) + ")")};
}

}  // namespace

HeaderLine parse_header_line(std::string_view line, ResponseHeaders& headers) {
  if (line.rfind("HTTP/", 0) == 0) {
    headers = ResponseHeaders{};
    const auto sp = line.find(' ');
    if (sp != std::string_view::npos)
      headers.status = std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
    return HeaderLine::kStatusLine;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) {
    if (!core::trim(line).empty()) return HeaderLine::kOther;
    headers.ended = true;
    return HeaderLine::kEnd;
  }
  const std::string name = core::ascii_lower(core::trim(line.substr(0, colon)));
  const std::string value = core::trim(line.substr(colon + 1));
  if (name == "content-length") {
    headers.content_length = parse_u64(value).value_or(kUnknown);
  } else if (name == "etag") {
    headers.etag = value;
  } else if (name == "content-range") {
    parse_content_range(value, headers);
  }
  return HeaderLine::kField;
}

std::optional<Refusal> check_answer(const ResponseHeaders& h, const AskedRange& asked,
                                    const std::optional<PartExpectation>& part) {
  if (h.status == 206) {
    if (h.range_first == kUnknown || h.range_last == kUnknown || h.range_total == kUnknown ||
        h.range_last < h.range_first || h.range_last >= h.range_total) {
      return mismatch("206 answer without a valid Content-Range", h, asked);
    }
    if (asked.end != kUnknown) {
      const std::uint64_t last = std::min(asked.end, h.range_total - 1);
      if (h.range_first != asked.begin || h.range_last != last) {
        return mismatch("206 answer for other bytes than asked", h, asked);
      }
    }
    if (h.content_length != kUnknown && h.content_length != h.range_last - h.range_first + 1) {
      return mismatch("Content-Length " + std::to_string(h.content_length) + " disagrees with Content-Range", h, asked);
    }
  }
  if (!part) return std::nullopt;
  if (h.status != 206 || h.range_total != part->total)
    return mismatch("part answer does not match the request", h, asked);
  if (!part->etag.empty() && h.etag != part->etag) {
    return Refusal{.code = ErrorCode::kUnavailable,
                   .message = "the object changed during the fetch (ETag " + std::string(part->etag) + ", then " +
                              (h.etag.empty() ? std::string("none") : h.etag) + ")",
                   .object_changed = true};
  }
  return std::nullopt;
}

std::string raise_hint(std::string_view option) {
  std::string flag = "--" + std::string(option);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return "(raise " + std::string(option) + ", " + flag + ")";
}

std::optional<Refusal> check_object_size(std::uint64_t bytes, std::string_view declared_by,
                                         std::uint64_t max_object_bytes, std::string_view option) {
  if (bytes <= max_object_bytes) return std::nullopt;
  return Refusal{.code = ErrorCode::kResourceExhausted,
                 .message = "object of " + std::to_string(bytes) + " bytes (" + std::string(declared_by) +
                            ") exceeds the object size limit of " + std::to_string(max_object_bytes) + " bytes " +
                            raise_hint(option)};
}

std::optional<Error> check_body_complete(const ResponseHeaders& h, std::uint64_t received, bool part,
                                         std::uint64_t expected, const std::string& uri) {
  if (h.content_length != kUnknown && received != h.content_length) {
    return Error(ErrorCode::kIoError,
                 "truncated body: " + std::to_string(received) + " of " + std::to_string(h.content_length) + " bytes",
                 uri);
  }
  if (part && received != expected) {
    return Error(ErrorCode::kIoError,
                 "truncated part: " + std::to_string(received) + " of " + std::to_string(expected) + " bytes", uri);
  }
  return std::nullopt;
}

}  // namespace mmfeed::storage
