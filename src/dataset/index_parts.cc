// A manifest's index in parts (include/mmfeed/index.h: plan_index_parts, describe_index_part;
// index_parts.h: their bytes, and how build_index takes them).
#include "dataset/index_parts.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <optional>
#include <utility>

#include "dataset/index_describe.h"
#include "dataset/le_bytes.h"
#include "dataset/remote_copy.h"
#include "dataset/source_files.h"
#include "storage/redact.h"
#include "storage/uri.h"

namespace mmfeed {

namespace {

using dataset::crc32_of;
using dataset::get_le;
using dataset::put_le;

constexpr std::array<char, 8> kPartMagic{'m', 'm', 'f', 'e', 'e', 'd', 'I', 'P'};
constexpr std::uint32_t kPartVersion = 1;
constexpr std::size_t kKeyBytes = 8 + 8 + 4 + 4 + 4 + 1 + 4;
constexpr std::size_t kPartHead = 8 + 4 + kKeyBytes + 8 + 8;      // before the samples' chunk
constexpr std::uint64_t kMinPartBytes = std::uint64_t{1} << 20;   // a planned part's least text
constexpr std::uint64_t kPlanPartBytes = std::uint64_t{1} << 30;  // a planned part's most text
constexpr std::uint64_t kMaxPartBytes = std::uint64_t{4} << 30;   // the most text a part holds
constexpr std::uint64_t kLineSearch = std::uint64_t{64} << 10;    // read past a range to end its line
constexpr std::uint64_t kArraySniff = std::uint64_t{64} << 10;    // read to tell a JSON array

// What a part is bound to: the source's version and where its text starts, and the options its
// facts depend on.
std::string part_key(const dataset::SourceStamp& stamp, std::uint32_t start, std::uint32_t tokens_key,
                     const IndexOptions& options) {
  std::string key;
  put_le(key, stamp.size, 8);
  put_le(key, static_cast<std::uint64_t>(stamp.mtime_ns), 8);
  put_le(key, stamp.etag_crc, 4);
  put_le(key, start, 4);
  put_le(key, tokens_key, 4);
  put_le(key, options.probe_media ? 1 : 0, 1);
  put_le(key, crc32_of(options.media_root.data(), options.media_root.size()), 4);
  return key;
}

// A source whose parts are planned or described: its stamp and where its text lies.
struct PartSource {
  storage::ObjectUri uri;
  std::string name;
  storage::S3Options s3;
  dataset::SourceStamp stamp;
  std::uint32_t start = 0;  // of the text in the file
  std::uint64_t text_size = 0;

  Result<std::string> read(std::uint64_t begin, std::uint64_t length) const {
    return dataset::read_source_range(uri, name, stamp, s3, start + begin, length);
  }
};

Result<PartSource> open_source(const std::string& source) {
  PartSource s;
  s.name = storage::redact_uri(source);
  if (dataset::layout_of(source.substr(0, source.find_first_of("?#"))) != dataset::Layout::kManifest) {
    return Error(ErrorCode::kUnsupported,
                 "only a JSONL or JSON manifest is indexed in parts (shards and Parquet files: mmfeed index, a "
                 "file at a time)",
                 s.name);
  }
  MMFEED_ASSIGN_OR_RETURN(s.uri, storage::parse_uri(source));
  if (s.uri.scheme != storage::Scheme::kFile) {
    MMFEED_ASSIGN_OR_RETURN(s.s3, storage::s3_options_from_environment());
  }
  MMFEED_ASSIGN_OR_RETURN(s.stamp, dataset::stamp_source(source, s.s3));
  MMFEED_ASSIGN_OR_RETURN(s.start, dataset::text_start(s.stamp.head, s.name));
  s.text_size = s.stamp.size - std::min<std::uint64_t>(s.start, s.stamp.size);
  return s;
}

// Where the first line starting at or after text byte `b` - 1's line begins: 0 for b = 0, the
// text's end where no line does; nullopt where `window` (the text from `lo`) ends before telling.
std::optional<std::uint64_t> line_start(std::string_view window, std::uint64_t lo, std::uint64_t b,
                                        std::uint64_t text_size) {
  if (b == 0) return 0;
  if (b >= text_size) return text_size;
  const std::size_t at = window.find('\n', b - 1 - lo);
  if (at != std::string_view::npos) return lo + at + 1;
  if (lo + window.size() >= text_size) return text_size;
  return std::nullopt;
}

// The text of the lines starting in `range`, and where it begins: the range read with what
// precedes it by a byte and follows it to its last line's end (read further while none ends).
Result<std::pair<std::uint64_t, std::string>> lines_of(const PartSource& src, IndexPartRange range) {
  const std::uint64_t lo = range.begin == 0 ? 0 : range.begin - 1;
  std::uint64_t hi = std::min(src.text_size, range.end + kLineSearch);
  const auto too_large = [&]() {
    return Error(ErrorCode::kResourceExhausted,
                 "a part of more than " + std::to_string(kMaxPartBytes) + " bytes of text; cut it into more parts",
                 src.name);
  };
  if (hi - lo > kMaxPartBytes) return too_large();
  MMFEED_ASSIGN_OR_RETURN(std::string window, src.read(lo, hi - lo));
  std::optional<std::uint64_t> first = line_start(window, lo, range.begin, src.text_size);
  std::optional<std::uint64_t> end = line_start(window, lo, range.end, src.text_size);
  while (!first || !end) {
    const std::uint64_t more = std::min(src.text_size, hi + std::max(hi - lo, kLineSearch));
    if (more - lo > kMaxPartBytes) return too_large();
    MMFEED_ASSIGN_OR_RETURN(const std::string tail, src.read(hi, more - hi));
    window += tail;
    hi = more;
    first = line_start(window, lo, range.begin, src.text_size);
    end = line_start(window, lo, range.end, src.text_size);
  }
  return std::pair(*first, window.substr(*first - lo, *end - *first));
}

// "train.jsonl:12..." (a line's name, `where` in manifest.h) counted from `base` lines on.
std::string renumbered(std::string named, const std::string& name, std::uint64_t base) {
  const std::string prefix = name + ":";
  if (base == 0 || !named.starts_with(prefix)) return named;
  const char* from = named.data() + prefix.size();
  std::uint64_t number = 0;
  const auto [to, ec] = std::from_chars(from, named.data() + named.size(), number);
  if (ec != std::errc() || to == from) return named;
  return prefix + std::to_string(number + base) +
         std::string(to, static_cast<std::size_t>(named.data() + named.size() - to));
}

}  // namespace

Result<std::vector<IndexPartRange>> plan_index_parts(const std::string& source, std::uint64_t parts) {
  MMFEED_ASSIGN_OR_RETURN(const PartSource src, open_source(source));
  if (src.text_size == 0) return std::vector<IndexPartRange>{{0, 0}};
  MMFEED_ASSIGN_OR_RETURN(const std::string head, src.read(0, std::min(src.text_size, kArraySniff)));
  const std::size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '[') return std::vector<IndexPartRange>{{0, src.text_size}};
  std::uint64_t n = std::max<std::uint64_t>({parts, 1, (src.text_size + kPlanPartBytes - 1) / kPlanPartBytes});
  n = std::min(n, std::max<std::uint64_t>(1, src.text_size / kMinPartBytes));
  std::vector<IndexPartRange> out;
  for (std::uint64_t k = 0; k < n; ++k) {
    // k * size / n without overflow: sizes stay far below 2^64 / n for any real n.
    out.push_back({src.text_size / n * k + src.text_size % n * k / n,
                   src.text_size / n * (k + 1) + src.text_size % n * (k + 1) / n});
  }
  return out;
}

Result<std::string> describe_index_part(const std::string& source, IndexPartRange range, const IndexOptions& options) {
  MMFEED_ASSIGN_OR_RETURN(const PartSource src, open_source(source));
  if (range.begin > range.end || range.end > src.text_size) {
    return Error(ErrorCode::kInvalidArgument,
                 "the part [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                     ") is not within its text of " + std::to_string(src.text_size) + " bytes",
                 src.name);
  }
  MMFEED_ASSIGN_OR_RETURN(auto lines, lines_of(src, range));
  const std::uint64_t begin = lines.first, end = begin + lines.second.size();
  dataset::Manifests manifests;
  dataset::Manifest m;
  m.name = src.name;
  m.base_dir = dataset::base_dir_of(src.uri);
  m.remote = src.uri.scheme != storage::Scheme::kFile;
  m.text = std::move(lines.second);
  const std::size_t first = m.text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && m.text[first] == '[' && (begin != 0 || end != src.text_size)) {
    return Error(ErrorCode::kUnsupported, "a JSON array's elements are no lines: describe its text in one part",
                 src.name);
  }
  MMFEED_RETURN_IF_ERROR(dataset::index_samples(m, 0, manifests.held));
  m.line_count = manifests.held.size();
  manifests.files.push_back(std::move(m));
  DatasetIndex index;
  MMFEED_ASSIGN_OR_RETURN(const std::optional<dataset::TokenCounter> counter,
                          dataset::token_counter(options, index.tokens_key));
  index.records.assign(manifests.held.size(), {});
  dataset::ChunkCounts counts;
  dataset::describe_range(manifests, 0, manifests.held.size(), src.start + begin, options, src.s3,
                          counter ? &*counter : nullptr, index, counts);
  std::string out(kPartMagic.begin(), kPartMagic.end());
  put_le(out, kPartVersion, 4);
  out += part_key(src.stamp, src.start, index.tokens_key, options);
  put_le(out, begin, 8);
  put_le(out, end, 8);
  out += dataset::chunk_bytes(index, 0, index.records.size(), 0, counts);
  put_le(out, crc32_of(out.data(), out.size()), 4);
  return out;
}

namespace dataset {

namespace {

// Part `p`'s samples checked against the text's lines from held[next] on (those starting in its
// range), renumbered and taken into `index` and `counts`; `next` and `next_byte` moved past them.
Status take_part(const std::string& p, const std::string& key, const Manifests& manifests, std::uint32_t start,
                 const std::string& what, std::uint64_t& next, std::uint64_t& next_byte, DatasetIndex& index,
                 ChunkCounts& counts) {
  const Manifest& m = manifests.files.front();
  const auto* bytes = reinterpret_cast<const std::byte*>(p.data());
  const auto fail = [&](ErrorCode code, const std::string& why) { return Error(code, why, what + " of " + m.name); };
  if (p.size() < kPartHead + 4 || get_le(bytes + p.size() - 4, 4) != crc32_of(p.data(), p.size() - 4)) {
    return fail(ErrorCode::kCorruptData, "truncated or damaged (its CRC-32 does not match)");
  }
  if (std::memcmp(p.data(), kPartMagic.data(), kPartMagic.size()) != 0) {
    return fail(ErrorCode::kCorruptData, "not a part of a dataset index");
  }
  if (get_le(bytes + 8, 4) != kPartVersion) return fail(ErrorCode::kUnsupported, "another version of a part");
  if (p.compare(12, kKeyBytes, key) != 0) {
    return fail(ErrorCode::kInvalidArgument,
                "described from another version of the source, or with other options (media root, media read or "
                "not, tokenizer and template)");
  }
  const std::uint64_t begin = get_le(bytes + 12 + kKeyBytes, 8), end = get_le(bytes + 20 + kKeyBytes, 8);
  if (begin != next_byte || end < begin || end > m.text_size()) {
    return fail(ErrorCode::kInvalidArgument, "its text [" + std::to_string(begin) + ", " + std::to_string(end) +
                                                 ") does not follow on from byte " + std::to_string(next_byte));
  }
  const std::vector<ManifestLine>& held = manifests.held;
  std::optional<Chunk> c = read_chunk(bytes + kPartHead, p.size() - kPartHead - 4, 0, 0, held.size() - next);
  if (!c) return fail(ErrorCode::kCorruptData, "its samples do not read back");
  const std::uint64_t n = c->records.size();
  for (std::uint64_t i = 0; i < n; ++i) {
    const ManifestLine& line = held[next + i];
    const IndexRecord& r = c->records[i];
    if (line.offset < begin || line.offset >= end || r.offset != start + line.offset || r.length != line.length) {
      return fail(ErrorCode::kInvalidArgument,
                  "its sample " + std::to_string(i) + " is not the text's " + manifests.where(line));
    }
  }
  if (next + n < held.size() && held[next + n].offset < end) {
    return fail(ErrorCode::kInvalidArgument, "it leaves out the text's " + manifests.where(held[next + n]));
  }
  const std::uint64_t base = n == 0 ? 0 : held[next].number - c->records[0].number;
  for (std::uint64_t i = 0; i < n; ++i) {
    IndexRecord& r = index.records[next + i];
    r = c->records[i];
    r.number = held[next + i].number;
    r.first_media += index.media.size();
  }
  index.media.insert(index.media.end(), c->media.begin(), c->media.end());
  counts.unreadable += c->counts.unreadable;
  counts.not_probed += c->counts.not_probed;
  for (std::string& named : c->counts.named) {
    if (counts.named.size() < kSummaryNamed) counts.named.push_back(renumbered(std::move(named), m.name, base));
  }
  next += n;
  next_byte = end;
  return ok_status();
}

}  // namespace

Status take_index_parts(const std::vector<std::string>& parts, const Manifests& manifests, const SourceStamp& stamp,
                        std::uint32_t start, const IndexOptions& options, DatasetIndex& index, ChunkCounts& counts) {
  const std::string key = part_key(stamp, start, index.tokens_key, options);
  std::uint64_t next = 0, next_byte = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const std::string what = "index part " + std::to_string(k + 1) + " of " + std::to_string(parts.size());
    MMFEED_RETURN_IF_ERROR(take_part(parts[k], key, manifests, start, what, next, next_byte, index, counts));
  }
  const Manifest& m = manifests.files.front();
  if (next_byte != m.text_size() || next != manifests.held.size()) {
    return Error(ErrorCode::kInvalidArgument,
                 "its " + std::to_string(parts.size()) + " index parts end at byte " + std::to_string(next_byte) +
                     " of its text's " + std::to_string(m.text_size()) + ": parts are missing",
                 m.name);
  }
  return ok_status();
}

}  // namespace dataset

}  // namespace mmfeed
