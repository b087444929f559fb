#include "dataset/manifest.h"

#include <fcntl.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <span>

#include "core/buffer_pool.h"
#include "core/mapped_file.h"
#include "dataset/arrow_files.h"
#include "dataset/index.h"
#include "dataset/index_cache.h"
#include "dataset/parquet.h"
#include "dataset/shard_reads.h"
#include "dataset/shards.h"
#include "dataset/source_files.h"
#include "dataset/wids.h"
#include "storage/fetcher.h"
#include "storage/redact.h"
#include "text/conversation.h"

namespace mmfeed::dataset {

namespace {

// The manifest (`grows`: "is larger than", "decompresses to more than") passes `limit`: refused
// before the memory is committed.
Error manifest_too_large(const std::string& where, std::size_t limit, const char* grows = "decompresses to more than") {
  return Error(ErrorCode::kResourceExhausted,
               std::string("manifest ") + grows + " max_manifest_bytes (" + std::to_string(limit) +
                   " bytes); split it, or raise the limit",
               where);
}

// Inflates gzip data (any number of members) up to `limit` bytes. zlib counts input in 32-bit
// units: the input is fed in pieces so that one over 4 GiB is read whole.
Result<std::string> gunzip(std::span<const std::byte> in, std::size_t limit, const std::string& where) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Error(ErrorCode::kInternal, "zlib init failed", where);
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  std::string out;
  std::size_t fed = 0;  // input bytes handed to zlib so far
  auto feed = [&] {
    if (z.avail_in > 0 || fed == in.size()) return;
    const std::size_t piece = std::min(kPiece, in.size() - fed);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + fed));
    z.avail_in = static_cast<uInt>(piece);
    fed += piece;
  };
  auto left = [&] { return z.avail_in > 0 || fed < in.size(); };
  char chunk[1 << 16];
  int rc = Z_OK;
  feed();
  while (rc != Z_STREAM_END || left()) {
    if (rc == Z_STREAM_END) inflateReset(&z);  // a concatenated member
    feed();
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      return Error(ErrorCode::kCorruptData, std::string("gzip data is corrupt: ") + (z.msg ? z.msg : "inflate failed"),
                   where);
    }
    const std::size_t produced = sizeof chunk - z.avail_out;
    if (out.size() + produced > limit) {
      inflateEnd(&z);
      return manifest_too_large(where, limit);
    }
    out.append(chunk, produced);
    if (rc != Z_STREAM_END && !left() && z.avail_out != 0) {
      inflateEnd(&z);
      return Error(ErrorCode::kCorruptData, "gzip data is truncated", where);
    }
  }
  inflateEnd(&z);
  return out;
}

// Decompresses Zstandard data (any number of frames) up to `limit` bytes.
Result<std::string> unzstd(std::span<const std::byte> in, std::size_t limit, const std::string& where) {
  std::unique_ptr<ZSTD_DStream, decltype(&ZSTD_freeDStream)> stream(ZSTD_createDStream(), &ZSTD_freeDStream);
  if (!stream) return Error(ErrorCode::kInternal, "zstd init failed", where);
  std::string out;
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  std::string chunk(ZSTD_DStreamOutSize(), '\0');
  std::size_t hint = 1;  // 0 once a frame is complete and flushed
  for (;;) {
    ZSTD_outBuffer output{chunk.data(), chunk.size(), 0};
    const std::size_t consumed = input.pos;
    const std::size_t r = ZSTD_decompressStream(stream.get(), &output, &input);
    if (ZSTD_isError(r)) {
      return Error(ErrorCode::kCorruptData, std::string("zstd data is corrupt: ") + ZSTD_getErrorName(r), where);
    }
    if (output.pos == 0 && input.pos == consumed) break;  // nothing left buffered
    hint = r;
    if (out.size() + output.pos > limit) return manifest_too_large(where, limit);
    out.append(chunk.data(), output.pos);
    if (input.pos == input.size && output.pos < output.size) break;
  }
  if (hint != 0) return Error(ErrorCode::kCorruptData, "zstd data is truncated", where);
  return out;
}

// A JSONL manifest's non-blank lines.
Status index_lines(std::string_view text, std::uint32_t manifest, const std::string& name,
                   std::vector<ManifestLine>& out) {
  std::uint64_t number = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    ++number;
    const std::string_view line = text.substr(at, end - at);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      if (line.size() > UINT32_MAX) {
        return Error(ErrorCode::kResourceExhausted, "line of " + std::to_string(line.size()) + " bytes",
                     name + ":" + std::to_string(number));
      }
      out.push_back({at, static_cast<std::uint32_t>(line.size()), manifest, number});
    }
    at = end + 1;
  }
  return ok_status();
}

// The elements of a manifest that is one JSON array (LLaVA's and LLaMA-Factory's .json files),
// found by one pass over the text that follows strings and nesting only: no element is parsed
// here (each is parsed when its sample is read, and a malformed one is that sample's error), so
// indexing costs a scan, not a document tree of the whole file. A bracket that closes the wrong
// nesting leaves the elements after it without bounds: the file is refused there. `open` is the '['.
Status index_array(std::string_view text, std::size_t open, std::uint32_t manifest, const std::string& name,
                   std::vector<ManifestLine>& out) {
  auto refuse = [&](const std::string& what, std::size_t at) {
    return Error(ErrorCode::kCorruptData, "not a JSON array of samples: " + what + " at byte " + std::to_string(at),
                 name);
  };
  auto blank = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  std::uint64_t number = 0;
  std::size_t at = open + 1;
  std::string closers;  // the brackets open inside the current element, innermost last
  for (;;) {
    while (at < text.size() && blank(text[at])) ++at;
    if (at == text.size()) return refuse("the array is not closed (is the file truncated?)", at);
    if (text[at] == ']' && number == 0) break;  // []
    const std::size_t begin = at;
    bool in_string = false;
    for (; at < text.size(); ++at) {
      const char ch = text[at];
      if (in_string) {
        if (ch == '\\')
          ++at;
        else if (ch == '"')
          in_string = false;
      } else if (ch == '"') {
        in_string = true;
      } else if (ch == '{' || ch == '[') {
        closers.push_back(ch == '{' ? '}' : ']');
      } else if (ch == '}' || ch == ']') {
        if (closers.empty()) break;
        if (closers.back() != ch) {
          return refuse(
              std::string("'") + ch + "' where '" + closers.back() + "' closes element " + std::to_string(number), at);
        }
        closers.pop_back();
      } else if (ch == ',' && closers.empty()) {
        break;
      }
    }
    if (at >= text.size()) return refuse("the array is not closed (is the file truncated?)", text.size());
    std::size_t end = at;
    while (end > begin && blank(text[end - 1])) --end;
    if (end == begin) return refuse("an empty element", begin);
    if (end - begin > UINT32_MAX) {
      return Error(ErrorCode::kResourceExhausted, "element of " + std::to_string(end - begin) + " bytes",
                   name + "[" + std::to_string(number) + "]");
    }
    out.push_back({begin, static_cast<std::uint32_t>(end - begin), manifest, number++});
    if (text[at] == '}') return refuse("'}' closes no object", at);
    if (text[at++] == ']') break;
  }
  while (at < text.size() && blank(text[at])) ++at;
  if (at != text.size()) return refuse("more after the array's end", at);
  return ok_status();
}

}  // namespace

std::string base_dir_of(const storage::ObjectUri& uri) {
  if (uri.scheme == storage::Scheme::kFile) return std::filesystem::path(uri.path).parent_path().string();
  const std::string full = uri.scheme == storage::Scheme::kS3 ? "s3://" + uri.bucket + "/" + uri.key
                                                              : uri.url.substr(0, uri.url.find_first_of("?#"));
  return full.substr(0, full.rfind('/'));
}

Status index_samples(std::string_view text, const std::string& name, std::uint32_t manifest, bool& array,
                     std::vector<ManifestLine>& out) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  array = first != std::string_view::npos && text[first] == '[';
  return array ? index_array(text, first, manifest, name, out) : index_lines(text, manifest, name, out);
}

Status index_samples(Manifest& m, std::uint32_t manifest, std::vector<ManifestLine>& out) {
  return index_samples(m.text, m.name, manifest, m.array, out);
}

Result<Manifests> read_mapped_manifest(const std::string& path, const std::string& name) {
  MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(path));
  auto mapped = core::MappedFile::open(uri.path);
  if (!mapped.ok()) return Error(ErrorCode::kNotFound, "cannot map it: " + mapped.error().message(), name);
  std::string_view text(reinterpret_cast<const char*>(mapped->bytes().data()), mapped->size());
  const std::uint32_t start = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // a UTF-8 byte-order mark
  text.remove_prefix(start);
  Manifests out;
  Manifest m;
  m.name = name;
  m.base_dir = base_dir_of(uri);
  MMFEED_RETURN_IF_ERROR(index_samples(text, name, 0, m.array, out.held));
  if (out.held.empty()) return Error(ErrorCode::kInvalidArgument, "it holds no sample", name);
  m.crc32 = static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(text.data()), text.size()));
  const int fd = ::open(uri.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error(ErrorCode::kNotFound, "cannot open it", name);
  m.indexed = std::make_shared<LocalText>(fd, name, start, text.size());
  m.line_count = out.held.size();
  out.files.push_back(std::move(m));
  return out;
}

namespace {

// One JSONL or JSON file, fetched (within `limit`), decompressed and named; not yet indexed.
Result<Manifest> read_text_file(const std::string& path, std::size_t limit, storage::Fetcher& fetcher) {
  MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(path));
  Manifest m;
  m.name = storage::redact_uri(path);
  if (!fetcher.submit({uri, 0, std::nullopt})) return Error(ErrorCode::kInternal, "fetcher closed", m.name);
  auto r = fetcher.next();
  if (!r) return Error(ErrorCode::kInternal, "fetcher closed", m.name);
  if (!r->data.ok()) {
    // The fetcher enforces the limit as its object size limit, and its refusal names that
    // option (max_object_bytes, the media's); for a manifest the limit is max_manifest_bytes.
    const Error& e = r->data.error();
    if (e.code() == ErrorCode::kResourceExhausted && e.message().find("max_object_bytes") != std::string::npos) {
      return manifest_too_large(m.name, limit, "is larger than");
    }
    return std::move(r->data).error().with_context("manifest");
  }
  core::Buffer data = std::move(r->data).value();
  if (data.size() >= 2 && data.data()[0] == std::byte{0x1f} && data.data()[1] == std::byte{0x8b}) {
    MMFEED_ASSIGN_OR_RETURN(m.text, gunzip(data.span(), limit, m.name));
  } else if (data.size() >= 4 && data.data()[0] == std::byte{0x28} && data.data()[1] == std::byte{0xb5} &&
             data.data()[2] == std::byte{0x2f} && data.data()[3] == std::byte{0xfd}) {
    MMFEED_ASSIGN_OR_RETURN(m.text, unzstd(data.span(), limit, m.name));
  } else {
    m.text.assign(reinterpret_cast<const char*>(data.data()), data.size());
  }
  data.reset();
  if (m.text.starts_with("\xEF\xBB\xBF")) m.text.erase(0, 3);  // a UTF-8 byte-order mark some editors add
  m.remote = uri.scheme != storage::Scheme::kFile;
  m.base_dir = base_dir_of(uri);
  return m;
}

// The JSONL and JSON `files` of source `source` as one manifest, manifest number `manifest`:
// one file's as it is, several as parts of one text (each indexed on its own, numbered from its
// own first line), within `limit` together.
Result<Manifest> read_text_files(const std::string& source, const std::vector<std::string>& files, std::size_t limit,
                                 const storage::S3Options& s3, storage::Fetcher& fetcher, std::uint32_t manifest,
                                 std::vector<ManifestLine>& out, const Indexes& indexes) {
  if (files.size() == 1 && indexes.use) {
    MMFEED_ASSIGN_OR_RETURN(std::optional<Manifest> indexed, open_indexed(files[0], indexes, manifest, s3, limit));
    if (indexed) return std::move(*indexed);
  }
  Manifest whole;
  for (const std::string& file : files) {
    MMFEED_ASSIGN_OR_RETURN(Manifest m, read_text_file(file, limit - std::min(limit, whole.text.size()), fetcher));
    std::vector<ManifestLine> lines;
    MMFEED_RETURN_IF_ERROR(index_samples(m, manifest, lines));
    if (files.size() == 1) {
      m.crc32 = static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(m.text.data()), m.text.size()));
      out.insert(out.end(), lines.begin(), lines.end());
      return m;
    }
    const std::uint64_t offset = whole.text.size();
    for (ManifestLine& line : lines) line.offset += offset;
    out.insert(out.end(), lines.begin(), lines.end());
    whole.parts.push_back({m.name, m.base_dir, offset, m.array});
    whole.remote = whole.remote || m.remote;
    if (whole.base_dir.empty()) whole.base_dir = m.base_dir;
    whole.text += m.text;
    if (whole.text.size() > limit) return manifest_too_large(storage::redact_uri(source), limit, "is larger than");
  }
  whole.name = storage::redact_uri(source);
  whole.crc32 =
      static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(whole.text.data()), whole.text.size()));
  return whole;
}

// Source `source` (its files `files`) read as manifest number `manifest`.
Result<Manifest> read_source(const std::string& source, const SourceFiles& files, std::size_t limit,
                             const storage::S3Options& s3, storage::Fetcher& fetcher, std::uint32_t manifest,
                             std::vector<ManifestLine>& lines, const Indexes& indexes) {
  switch (files.layout) {
    case Layout::kManifest: {
      const std::size_t held = lines.size();
      MMFEED_ASSIGN_OR_RETURN(Manifest m,
                              read_text_files(source, files.files, limit, s3, fetcher, manifest, lines, indexes));
      if (files.files.size() != 1 || !files.files[0].ends_with(".json") || m.indexed) return m;
      MMFEED_ASSIGN_OR_RETURN(std::optional<WidsShards> wids, parse_wids_descriptor(m.text, m.name, m.base_dir));
      if (!wids) return m;
      lines.resize(held);  // a wids descriptor: its shards are the source
      MMFEED_ASSIGN_OR_RETURN(Manifest shards,
                              read_shards(source, wids->urls, limit, s3, manifest, lines, indexes.cache_dir));
      MMFEED_RETURN_IF_ERROR(check_wids_counts(shards, *wids, m.name));
      return shards;
    }
    case Layout::kShards: return read_shards(source, files.files, limit, s3, manifest, lines, indexes.cache_dir);
    case Layout::kParquet:
      return read_parquet(source, files.files, limit, s3, manifest, lines, indexes.use, indexes.cache_dir);
    case Layout::kArrow: return read_arrow_files(source, files.files, limit, manifest, lines);
    case Layout::kEnergon: return read_energon_dataset(files.files.front(), limit, s3, manifest, lines);
  }
  return Error(ErrorCode::kInternal, "a layout without a reader", source);
}

}  // namespace

// Reads each source as one manifest (manifest.h), whatever layout its files have.
Result<Manifests> read_manifests(const std::vector<std::string>& paths, std::size_t limit, const storage::S3Options& s3,
                                 const Indexes& indexes) {
  Manifests out;
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = limit;
  storage::Fetcher fetcher(options, s3);
  for (const std::string& path : paths) {
    MMFEED_ASSIGN_OR_RETURN(SourceFiles source, source_files(path, s3));
    const std::uint64_t held = out.held.size();
    MMFEED_ASSIGN_OR_RETURN(Manifest m, read_source(path, source, limit, s3, fetcher,
                                                    static_cast<std::uint32_t>(out.files.size()), out.held, indexes));
    if (!m.shards.empty()) m.base_dir = base_dir_of(m.shards.front().uri);
    m.first_line = out.size();
    m.lines_from = held;
    m.line_count = m.index ? m.index->samples() : m.ranges ? m.ranges->samples() : out.held.size() - held;
    out.files.push_back(std::move(m));
  }
  if (out.size() == 0) return Error(ErrorCode::kInvalidArgument, "the manifests hold no samples");
  return out;
}

Result<ManifestLine> Manifests::line(std::uint64_t i) const {
  const std::uint32_t n = manifest_of(i);
  const Manifest& m = files[n];
  if (m.ranges) {
    const std::uint64_t k = i - m.first_line;
    const std::size_t shard = m.ranges->shard_of(k);
    const std::vector<std::uint64_t>& starts = m.ranges->starts[shard];
    const std::uint64_t j = k - m.ranges->first_sample[shard];
    return ManifestLine{starts[j], static_cast<std::uint32_t>(starts[j + 1] - starts[j]), n, k};
  }
  if (m.index == nullptr) return held[m.lines_from + (i - m.first_line)];
  MMFEED_ASSIGN_OR_RETURN(const IndexRecord r, m.index->record(i - m.first_line));
  return ManifestLine{r.offset - m.index->header().text_start, r.length, n, r.number};
}

void Manifests::prefetch(std::span<const std::uint64_t> indexes) const {
  std::map<std::uint32_t, std::vector<TextRange>> wanted;                 // by manifest
  std::map<std::uint32_t, std::vector<RemoteShardReads::Range>> samples;  // of remote shards, by manifest
  for (const std::uint64_t i : indexes) {
    const std::uint32_t n = manifest_of(i);
    const Manifest& m = files[n];
    const bool shards = m.ranges && m.ranges->remote;
    if (!shards && (!m.indexed || !m.indexed->remote())) continue;
    const Result<ManifestLine> found = line(i);
    if (!found.ok()) continue;  // its own read names what is wrong
    if (shards) {
      samples[n].push_back({m.ranges->shard_of(found->number), found->offset, found->length});
    } else {
      wanted[n].push_back({found->offset, found->length});
    }
  }
  for (const auto& [n, ranges] : wanted) files[n].indexed->prefetch(ranges);
  for (const auto& [n, ranges] : samples) files[n].ranges->remote->prefetch(ranges);
}

IndexedText::Reads Manifests::remote_text_reads() const {
  IndexedText::Reads out;
  for (const Manifest& m : files) {
    const IndexedText::Reads r = m.indexed                      ? m.indexed->reads()
                                 : m.ranges && m.ranges->remote ? m.ranges->remote->reads()
                                                                : IndexedText::Reads{};
    out.requests += r.requests;
    out.bytes += r.bytes;
  }
  return out;
}

Result<RangeSample> Manifests::read_range(const ManifestLine& line, std::size_t limit) const {
  const Manifest& m = files[line.manifest];
  const std::size_t shard = m.ranges->shard_of(line.number);
  auto read = m.ranges->remote ? m.ranges->remote->read({shard, line.offset, line.length}, limit)
                               : read_shard_range(m.shards[shard].uri.path, line.offset, line.length, limit);
  if (!read.ok()) return std::move(read).error().with_context(where(line));
  return read;
}

Result<std::vector<MediaRef>> media_of(const Manifests& manifests, const std::vector<std::string>& media_roots,
                                       bool allow_local_from_remote) {
  std::string buffer;
  std::vector<MediaRef> out;
  for (std::uint64_t i = 0; i < manifests.size(); ++i) {
    MMFEED_ASSIGN_OR_RETURN(const ManifestLine line, manifests.line(i));
    const Manifest& m = manifests.files[line.manifest];
    std::string where = manifests.where(line);
    std::optional<RangeSample> range;
    if (m.ranges) {
      MMFEED_ASSIGN_OR_RETURN(range, manifests.read_range(line, kDefaultMaxManifestBytes));
      where = m.shards[m.ranges->shard_of(line.number)].name + "[" + range->key + "]";
    } else if (!m.shards.empty() && m.samples[line.number].error) {
      return Error(*m.samples[line.number].error).with_context(where);
    }
    MMFEED_ASSIGN_OR_RETURN(const std::string_view text,
                            range ? Result<std::string_view>(range->json) : manifests.text(line, buffer));
    auto c = text::parse_conversation(text);
    if (!c.ok()) return std::move(c).error().with_context(where);
    const std::string id = c->id.empty() ? where : c->id;
    for (auto type :
         {text::ContentItem::Type::kImage, text::ContentItem::Type::kVideo, text::ContentItem::Type::kAudio}) {
      for (const std::string& ref : c->media(type)) {
        auto source = resolve_media(ref, manifests, line, media_root_of(media_roots, line.manifest),
                                    allow_local_from_remote, range ? &*range : nullptr);
        if (!source.ok()) return std::move(source).error().with_context(where + " (sample " + id + ")");
        out.push_back({std::move(source).value(), id});
      }
    }
  }
  return out;
}

std::string_view media_root_of(const std::vector<std::string>& media_roots, std::size_t manifest) {
  if (media_roots.empty()) return {};
  return media_roots.size() == 1 ? media_roots[0] : media_roots.at(manifest);
}

Result<storage::ObjectUri> resolve(std::string_view ref, const Manifest& manifest, std::string_view base_dir,
                                   std::string_view media_root, bool allow_local_from_remote) {
  std::string base(media_root.empty() ? base_dir : media_root);
  const bool remote_base = base.find("://") != std::string::npos;
  while (remote_base && base.ends_with('/') && !base.ends_with("://")) base.pop_back();
  const bool relative = ref.find("://") == std::string_view::npos && !ref.empty() && ref[0] != '/';
  // Relative references against a remote base stay remote (a prefix joined, not a path resolved).
  MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, remote_base && relative
                                                      ? storage::parse_uri(base + "/" + std::string(ref))
                                                      : storage::parse_uri(ref, base));
  // A local media_root is the user's choice; a local file the remote manifest names itself is not.
  const bool user_rooted = relative && !media_root.empty();
  if (manifest.remote && uri.scheme == storage::Scheme::kFile && !user_rooted && !allow_local_from_remote) {
    return Error(ErrorCode::kPermissionDenied,
                 "the local file " + uri.path +
                     " is named by a remote manifest: refused (a manifest fetched from http(s):// or s3:// may name "
                     "only remote media; allow_local_media_from_remote_manifest, "
                     "--allow-local-media-from-remote-manifest, allows it)");
  }
  return uri;
}

Result<MediaSource> resolve_media(std::string_view ref, const Manifests& manifests, const ManifestLine& line,
                                  std::string_view media_root, bool allow_local_from_remote, const RangeSample* range) {
  const Manifest& m = manifests.files[line.manifest];
  if (m.parquet) {  // a cell the row's JSON names, else a path
    const ShardSample& s = m.samples[line.number];
    for (std::uint64_t k = s.first_member; k < s.first_member + s.member_count; ++k) {
      if (m.members[k].suffix != ref) continue;
      const CellPlace& p = m.cells[k];
      std::string member = "row " + s.key + ", " + m.members[k].suffix;
      if (p.value) return MediaSource{m.shards[s.shard].uri, *p.value, std::move(member), nullptr};
      return MediaSource{m.shards[s.shard].uri, storage::ByteRange{m.members[k].offset, m.members[k].size},
                         std::move(member),
                         std::make_shared<ParquetCell>(ParquetCell{m.chunks[p.chunk], p.first_row, p.row, p.element})};
    }
  }
  const bool bare = ref.find('/') == std::string_view::npos && ref.find("://") == std::string_view::npos;
  if (m.ranges && range == nullptr) {
    return Error(ErrorCode::kInternal, "a shard sample known by its range is resolved with what it read");
  }
  if (!m.shards.empty() && !m.parquet && bare) {
    // The sample's key, shard and members: as read by its range, else as the scan found them.
    const ShardSample* scanned = range ? nullptr : &m.samples[line.number];
    const std::string& key = range ? range->key : scanned->key;
    const Shard& shard = m.shards[range ? m.ranges->shard_of(line.number) : scanned->shard];
    const auto first =
        range ? range->members.begin() : m.members.begin() + static_cast<std::ptrdiff_t>(scanned->first_member);
    const auto last = range ? range->members.end() : first + scanned->member_count;
    const bool full = ref.size() > key.size() && ref.starts_with(key) && ref[key.size()] == '.';
    const std::string_view suffix = full ? ref.substr(key.size() + 1) : ref;
    if (const auto member = std::find_if(first, last, [&](const ShardMember& x) { return x.suffix == suffix; });
        member != last) {
      return MediaSource{shard.uri, storage::ByteRange{member->offset, member->size}, key + "." + member->suffix,
                         nullptr};
    }
    if (media_root.empty()) {
      std::string members;
      for (auto it = first; it != last; ++it) members += (members.empty() ? "" : ", ") + it->suffix;
      return Error(ErrorCode::kNotFound, "names " + std::string(ref) + ", but sample " + key + " of " + shard.name +
                                             " has no member " + key + "." + std::string(suffix) +
                                             " (its members: " + members + ")");
    }
  }
  const ManifestPart* part = m.part_at(line.offset);
  MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri,
                          resolve(ref, m, part ? part->base_dir : m.base_dir, media_root, allow_local_from_remote));
  return MediaSource{std::move(uri), std::nullopt, "", nullptr};
}

}  // namespace mmfeed::dataset
