// The index is written and read here side by side (its header's fields, its block table, its
// records' bytes), so that writer and reader cannot drift. (How samples are described:
// index_describe.cc; an index built in parts: index_parts.cc; file sets -- shards, Parquet files,
// a wids descriptor's shards -- are indexed in index_sets.cc.)
//
// The dataset index (include/mmfeed/index.h): built from the manifest as the Loader reads it
// (read_manifests: the same lines, the same elements, the same CRC-32), written little-endian
// in fixed-width records checked a block at a time: the header and the block table when opened,
// each block of records and its media entries when first touched.
#include "mmfeed/index.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <system_error>
#include <thread>

#include "core/cpus.h"
#include "core/mapped_file.h"
#include "core/models.h"
#include "dataset/index.h"
#include "dataset/index_describe.h"
#include "dataset/index_journal.h"
#include "dataset/index_parts.h"
#include "dataset/index_sets.h"
#include "dataset/le_bytes.h"
#include "dataset/manifest.h"
#include "dataset/media_facts.h"
#include "dataset/remote_copy.h"
#include "dataset/source_files.h"
#include "storage/fetcher.h"
#include "storage/redact.h"
#include "storage/uri.h"
#include "text/chat.h"
#include "text/chat_encode.h"
#include "text/conversation.h"
#include "text/tokenizer.h"

namespace mmfeed {

namespace {

using dataset::crc32_of;
using dataset::describe_range;
using dataset::get_le;
using dataset::put_le;
using dataset::text_start;
using dataset::token_counter;
using dataset::TokenCounter;

constexpr std::array<char, 8> kMagic{'m', 'm', 'f', 'e', 'e', 'd', 'I', 'X'};
constexpr std::size_t kHeaderBytes = 96;
using dataset::kMediaBytes;
using dataset::kRecordBytes;
constexpr std::size_t kBlockRecords = 256;  // records a block: 10 KiB, checked when first touched
constexpr std::size_t kBlockBytes = 16;     // a block table entry

std::uint64_t blocks_of(std::uint64_t samples) { return (samples + kBlockRecords - 1) / kBlockRecords; }
constexpr std::size_t kNamed = dataset::kSummaryNamed;

constexpr std::size_t kHeadBytes = 4;  // of a source, read with its stamp

Result<dataset::SourceStamp> stamp_local(const std::string& path, const std::string& source) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error(ErrorCode::kNotFound, "no such file", source);
  dataset::SourceStamp stamp;
  stamp.size = static_cast<std::uint64_t>(st.st_size);
  stamp.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  std::ifstream in(path, std::ios::binary);
  stamp.head.resize(kHeadBytes);
  in.read(stamp.head.data(), kHeadBytes);
  stamp.head.resize(static_cast<std::size_t>(in.gcount()));
  return stamp;
}

// A remote object's stamp: one GET of its first bytes gives its size (Content-Range's total) and
// its ETag.
Result<dataset::SourceStamp> stamp_remote(const storage::ObjectUri& uri, const std::string& source,
                                          const storage::S3Options& s3) {
  storage::FetchOptions options;
  options.part_size = 0;
  storage::Fetcher fetcher(options, s3);
  if (!fetcher.submit({uri, 0, storage::ByteRange{0, kHeadBytes}})) {
    return Error(ErrorCode::kInternal, "fetcher closed", source);
  }
  fetcher.close();
  std::optional<storage::FetchResult> r = fetcher.next();
  if (!r) return Error(ErrorCode::kInternal, "fetcher closed", source);
  if (!r->data.ok()) return std::move(r->data).error().with_context("manifest");
  if (r->etag.empty()) {
    return Error(ErrorCode::kUnsupported, "its server sends no ETag, so no index can be bound to it", source);
  }
  dataset::SourceStamp stamp;
  stamp.size = r->object_size;
  stamp.etag = r->etag;
  stamp.etag_crc = crc32_of(stamp.etag.data(), stamp.etag.size());
  if (stamp.etag_crc == 0) stamp.etag_crc = 1;
  stamp.head.assign(reinterpret_cast<const char*>(r->data->data()), std::min(r->data->size(), kHeadBytes));
  return stamp;
}

std::string encode(const DatasetIndex& index, std::uint32_t start) {
  std::string records;
  records.reserve(index.records.size() * kRecordBytes);
  for (const IndexRecord& r : index.records) dataset::put_record(records, r);
  std::string media;
  media.reserve(index.media.size() * kMediaBytes);
  for (const MediaFacts& f : index.media) dataset::put_media(media, f);
  // A block's records, and the media entries from its first record's to the next block's first.
  const std::uint64_t n = index.records.size();
  std::string table;
  for (std::uint64_t b = 0; b < blocks_of(n); ++b) {
    const std::uint64_t first = b * kBlockRecords, end = std::min<std::uint64_t>(n, first + kBlockRecords);
    const std::uint64_t media_from = index.records[first].first_media;
    const std::uint64_t media_to = end < n ? index.records[end].first_media : index.media.size();
    put_le(table, crc32_of(records.data() + first * kRecordBytes, (end - first) * kRecordBytes), 4);
    put_le(table, crc32_of(media.data() + media_from * kMediaBytes, (media_to - media_from) * kMediaBytes), 4);
    put_le(table, media_from, 8);
  }
  std::string out(kMagic.begin(), kMagic.end());
  put_le(out, kIndexVersion, 4);
  put_le(out, kRecordBytes, 4);
  put_le(out, n, 8);
  put_le(out, index.source_size, 8);
  put_le(out, static_cast<std::uint64_t>(index.source_mtime_ns), 8);
  put_le(out, index.source_crc32, 4);
  put_le(out, crc32_of(table.data(), table.size()), 4);
  put_le(out, start, 4);
  put_le(out, index.array ? 1 : 0, 4);
  put_le(out, index.media.size(), 8);
  put_le(out, kBlockRecords, 4);
  put_le(out, kMediaBytes, 4);
  put_le(out, kBlockBytes, 4);
  put_le(out, index.tokens_key, 4);
  put_le(out, index.source_etag_crc, 4);
  out.append(8, '\0');
  put_le(out, crc32_of(out.data(), out.size()), 4);
  return out + table + records + media;
}

// What a build's journal is bound to: the source's stamp and text, and the options its records'
// facts depend on (a journal of anything else is started anew).
std::string journal_key(const dataset::SourceStamp& stamp, const DatasetIndex& index, std::uint32_t start,
                        const IndexOptions& options) {
  std::string key = "mmfeedIJ";
  put_le(key, 1, 4);  // the journal's version
  put_le(key, kIndexVersion, 4);
  put_le(key, stamp.size, 8);
  put_le(key, static_cast<std::uint64_t>(stamp.mtime_ns), 8);
  put_le(key, stamp.etag_crc, 4);
  put_le(key, index.source_crc32, 4);
  put_le(key, start, 4);
  put_le(key, index.records.size(), 8);
  put_le(key, index.tokens_key, 4);
  put_le(key, options.probe_media ? 1 : 0, 1);
  put_le(key, crc32_of(options.media_root.data(), options.media_root.size()), 4);
  put_le(key, options.checkpoint_samples, 8);
  return key;
}

// A file deleted when this goes out of scope (none where `path` is empty).
struct RemoveOnExit {
  explicit RemoveOnExit(std::string p) : path(std::move(p)) {}
  std::string path;
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;
  ~RemoveOnExit() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove(path, ec);
  }
};

// Where the index of manifest `source` is written: options.out, the cache_dir's place (created),
// else beside a local manifest; a remote one's needs one of the first two.
Result<std::string> index_destination(const std::string& source, const storage::ObjectUri& uri,
                                      const IndexOptions& options) {
  if (!options.out.empty()) return options.out;
  if (!options.cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.cache_dir, ec);
    if (ec) return Error(ErrorCode::kIoError, "cannot create the cache_dir: " + ec.message(), options.cache_dir);
    return dataset::cached_index_path(options.cache_dir, source);
  }
  if (uri.scheme != storage::Scheme::kFile) {
    return Error(ErrorCode::kInvalidArgument,
                 "a remote manifest's index is written here: say where (--out FILE, then upload it beside the "
                 "manifest as its name + .mmidx; or --cache-dir DIR, a Loader's cache_dir)",
                 storage::redact_uri(source));
  }
  return dataset::index_path_of(uri.path);
}

// Every sample described into `index`, a chunk at a time, each kept in `journal` as it ends (a
// build stopped resumes from there); what could not be read added to `counts`.
Status describe_all(const dataset::Manifests& manifests, std::uint32_t start, const IndexOptions& options,
                    const storage::S3Options& s3, const TokenCounter* counter, dataset::IndexJournal& journal,
                    DatasetIndex& index, dataset::ChunkCounts& counts) {
  for (std::uint64_t first = journal.resumed(); first < index.records.size(); first += options.checkpoint_samples) {
    const std::uint64_t end = std::min<std::uint64_t>(index.records.size(), first + options.checkpoint_samples);
    const std::uint64_t first_media = index.media.size();
    dataset::ChunkCounts chunk;
    describe_range(manifests, first, end, start, options, s3, counter, index, chunk);
    chunk.named.resize(std::min(chunk.named.size(), kNamed - std::min(kNamed, counts.named.size())));
    MMFEED_RETURN_IF_ERROR(journal.append(index, first, end, first_media, chunk));
    counts.unreadable += chunk.unreadable;
    counts.not_probed += chunk.not_probed;
    counts.named.insert(counts.named.end(), chunk.named.begin(), chunk.named.end());
  }
  return ok_status();
}

// The totals of `index` into `summary`, the samples that are no conversation named (parsed again
// for their reason: few samples are bad).
Status summarize(const dataset::Manifests& manifests, const DatasetIndex& index, IndexSummary& summary) {
  std::string buffer;
  for (std::size_t i = 0; i < index.records.size(); ++i) {
    const IndexRecord& r = index.records[i];
    summary.text_bytes += r.length;
    summary.text_tokens += r.text_tokens;
    if (r.bad) {
      if (summary.bad.size() < kNamed) {
        const dataset::ManifestLine& line = manifests.held[i];
        MMFEED_ASSIGN_OR_RETURN(const std::string_view text, manifests.text(line, buffer));
        summary.bad.push_back(manifests.where(line) + ": " + text::parse_conversation(text).error().to_string());
      }
      ++summary.bad_count;
      continue;
    }
    summary.images += r.images;
    summary.videos += r.videos;
    summary.audio += r.audio;
  }
  summary.samples = index.records.size();
  return ok_status();
}

}  // namespace

Result<IndexSummary> build_index(const std::string& source, const IndexOptions& options) {
  const std::string name = storage::redact_uri(source);
  MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(source));
  const bool remote = uri.scheme != storage::Scheme::kFile;
  storage::S3Options s3;
  if (remote) {
    MMFEED_ASSIGN_OR_RETURN(s3, storage::s3_options_from_environment());
  }
  if (options.checkpoint_samples == 0) {
    return Error(ErrorCode::kInvalidArgument, "checkpoint_samples must be at least 1", name);
  }
  const dataset::Layout layout = dataset::layout_of(source.substr(0, source.find_first_of("?#")));
  if (layout == dataset::Layout::kShards || layout == dataset::Layout::kParquet) {
    MMFEED_ASSIGN_OR_RETURN(const dataset::SourceFiles files, dataset::source_files(source, s3));
    return layout == dataset::Layout::kShards ? dataset::index_shards(source, files.files, options, s3)
                                              : dataset::index_parquet(source, files.files, options, s3);
  }
  if (!remote && source.ends_with(".json")) {  // a wids descriptor: its shards get their .tar.idx
    MMFEED_ASSIGN_OR_RETURN(std::optional<dataset::WidsShards> wids, dataset::local_wids_descriptor(uri.path, name));
    if (wids) return dataset::index_shards(source, wids->urls, options, s3);
  }
  IndexSummary summary;
  MMFEED_ASSIGN_OR_RETURN(summary.path, index_destination(source, uri, options));
  MMFEED_ASSIGN_OR_RETURN(const dataset::SourceStamp stamp, dataset::stamp_source(source, s3));
  MMFEED_ASSIGN_OR_RETURN(const std::uint32_t start, text_start(stamp.head, name));
  MMFEED_ASSIGN_OR_RETURN(const dataset::SourceFiles files, dataset::source_files(source, s3));
  if (files.layout != dataset::Layout::kManifest || files.files.size() != 1) {
    return Error(ErrorCode::kUnsupported, "index one JSONL or JSON file, or WebDataset shards, at a time", name);
  }
  // A local file is mapped, not copied; a remote one copied beside the index first (its parts
  // pinned to the version stamped), then mapped: no size limit either way.
  const RemoveOnExit copy{remote ? summary.path + ".source" : std::string()};
  if (remote) MMFEED_RETURN_IF_ERROR(dataset::copy_remote(uri, name, stamp, s3, copy.path));
  MMFEED_ASSIGN_OR_RETURN(dataset::Manifests manifests,
                          dataset::read_mapped_manifest(remote ? copy.path : source, name));
  if (remote) {  // its media resolve as the remote manifest's
    manifests.files.front().base_dir = dataset::base_dir_of(uri);
    manifests.files.front().remote = true;
  }
  const dataset::Manifest& m = manifests.files.front();
  DatasetIndex index{stamp.size, stamp.mtime_ns, m.crc32, m.array, 0, stamp.etag_crc, {}, {}};
  MMFEED_ASSIGN_OR_RETURN(const std::optional<TokenCounter> counter, token_counter(options, index.tokens_key));
  index.records.assign(manifests.size(), {});
  dataset::ChunkCounts counts;
  std::optional<dataset::IndexJournal> journal;
  if (options.parts.empty()) {
    MMFEED_ASSIGN_OR_RETURN(
        journal, dataset::IndexJournal::open(summary.path + ".journal", journal_key(stamp, index, start, options),
                                             index, counts));
    summary.resumed_samples = journal->resumed();
    MMFEED_RETURN_IF_ERROR(
        describe_all(manifests, start, options, s3, counter ? &*counter : nullptr, *journal, index, counts));
  } else {
    MMFEED_RETURN_IF_ERROR(dataset::take_index_parts(options.parts, manifests, stamp, start, options, index, counts));
  }
  summary.media_unreadable = counts.unreadable;
  summary.media_not_probed = counts.not_probed;
  summary.unreadable = std::move(counts.named);
  MMFEED_RETURN_IF_ERROR(summarize(manifests, index, summary));
  const std::string bytes = encode(index, start);
  MMFEED_RETURN_IF_ERROR(core::write_file_whole(summary.path, std::as_bytes(std::span(bytes))));
  if (journal) journal->remove();
  summary.index_bytes = bytes.size();
  return summary;
}

Result<std::uint32_t> text_tokens_key(const std::string& tokenizer_path, std::string_view chat_template) {
  auto mapped = core::MappedFile::open(tokenizer_path);
  if (!mapped.ok()) return Error(ErrorCode::kNotFound, "no tokenizer: " + mapped.error().message(), tokenizer_path);
  auto crc =
      static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(mapped->bytes().data()), mapped->size()));
  const std::string tail = std::string(1, '\0') + std::string(chat_template);
  crc = static_cast<std::uint32_t>(crc32_z(crc, reinterpret_cast<const Bytef*>(tail.data()), tail.size()));
  return crc == 0 ? 1u : crc;
}

namespace dataset {

std::string index_path_of(const std::string& file_path) { return file_path + ".mmidx"; }

bool compressed(std::string_view head) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(head[i]); };
  return (head.size() >= 2 && byte(0) == 0x1f && byte(1) == 0x8b) ||
         (head.size() >= 4 && byte(0) == 0x28 && byte(1) == 0xb5 && byte(2) == 0x2f && byte(3) == 0xfd);
}

std::string cached_index_path(const std::string& dir, const std::string& source) {
  std::string key = source, file = source;
  auto uri = storage::parse_uri(source);
  if (uri.ok() && uri->scheme == storage::Scheme::kFile) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(uri->path, ec);
    key = ec ? uri->path : absolute.string();
    file = uri->path;
  } else {
    key = source.substr(0, source.find_first_of("?#"));  // a presigned URL's signature changes; its object does not
    file = key;
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(key));
  const std::string base = file.substr(file.rfind('/') + 1);
  return (std::filesystem::path(dir) / (std::string(hash) + "-" + base + ".mmidx")).string();
}

Result<SourceStamp> stamp_source(const std::string& source, const storage::S3Options& s3) {
  MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(source));
  const std::string name = storage::redact_uri(source);
  return uri.scheme == storage::Scheme::kFile ? stamp_local(uri.path, name) : stamp_remote(uri, name, s3);
}

Result<std::shared_ptr<const MappedIndex>> MappedIndex::open(const std::string& path, const std::string& source,
                                                             const SourceStamp& now) {
  const auto refuse = [&](const std::string& why, ErrorCode code = ErrorCode::kCorruptData) {
    return Error(code, why, path);
  };
  auto mapped = core::MappedFile::open(path);
  if (!mapped.ok()) return Error(ErrorCode::kNotFound, "no index: " + mapped.error().message(), path);
  mapped->advise_random();
  const std::size_t size = mapped->size();
  const std::byte* at = mapped->bytes().data();
  if (size < kHeaderBytes) return refuse("not an mmfeed index (" + std::to_string(size) + " bytes)");
  if (std::memcmp(at, kMagic.data(), kMagic.size()) != 0) return refuse("not an mmfeed index");
  if (const std::uint64_t v = get_le(at + 8, 4); v != kIndexVersion) {
    return refuse("index version " + std::to_string(v) + ", this mmfeed reads version " +
                      std::to_string(kIndexVersion) + "; build it again (mmfeed index)",
                  ErrorCode::kUnsupported);
  }
  if (get_le(at + kHeaderBytes - 4, 4) != crc32_of(at, kHeaderBytes - 4))
    return refuse("its header is damaged (CRC-32)");
  if (get_le(at + 12, 4) != kRecordBytes || get_le(at + 64, 4) != kBlockRecords || get_le(at + 68, 4) != kMediaBytes ||
      get_le(at + 72, 4) != kBlockBytes) {
    return refuse("its record sizes are wrong");
  }
  IndexHeader h;
  h.samples = get_le(at + 16, 8);
  h.media = get_le(at + 56, 8);
  // The counts the header claims are checked against the file's size before anything is read.
  const std::uint64_t room = size - kHeaderBytes;
  const std::uint64_t fixed =
      room / kRecordBytes < h.samples ? room + 1 : blocks_of(h.samples) * kBlockBytes + h.samples * kRecordBytes;
  if (fixed > room || h.media > (room - fixed) / kMediaBytes || room != fixed + h.media * kMediaBytes) {
    return refuse("truncated or extended: " + std::to_string(size) + " bytes for " + std::to_string(h.samples) +
                  " samples and " + std::to_string(h.media) + " media");
  }
  h.source_size = get_le(at + 24, 8);
  h.source_mtime_ns = static_cast<std::int64_t>(get_le(at + 32, 8));
  h.source_crc32 = static_cast<std::uint32_t>(get_le(at + 40, 4));
  h.text_start = static_cast<std::uint32_t>(get_le(at + 48, 4));
  h.array = (get_le(at + 52, 4) & 1) != 0;
  h.tokens_key = static_cast<std::uint32_t>(get_le(at + 76, 4));
  h.etag_crc = static_cast<std::uint32_t>(get_le(at + 80, 4));
  if (now.size != h.source_size || now.mtime_ns != h.source_mtime_ns || now.etag_crc != h.etag_crc) {
    const char* since =
        h.etag_crc != now.etag_crc
            ? (h.etag_crc == 0 || now.etag_crc == 0 ? ", built for a local file and a remote one" : ", another ETag")
            : ", modified since";
    return refuse("stale: " + source + " changed since it was indexed (" + std::to_string(h.source_size) +
                      " bytes then, " + std::to_string(now.size) + " now" + (now.size == h.source_size ? since : "") +
                      "); build it again (mmfeed index) or delete it",
                  ErrorCode::kInvalidArgument);
  }
  if (h.samples == 0 && h.media != 0) return refuse("it holds media entries but no sample");
  const std::byte* table = at + kHeaderBytes;
  const std::uint64_t blocks = blocks_of(h.samples);
  if (get_le(at + 44, 4) != crc32_of(table, blocks * kBlockBytes)) return refuse("its block table is damaged (CRC-32)");
  for (std::uint64_t b = 0, previous = 0; b < blocks; ++b) {
    const std::uint64_t first = get_le(table + b * kBlockBytes + 8, 8);
    if ((b == 0 && first != 0) || first < previous || first > h.media) {
      return refuse("its block table names media entries it does not hold");
    }
    previous = first;
  }
  return std::make_shared<const MappedIndex>(std::move(mapped).value(), h, path, source);
}

MappedIndex::MappedIndex(core::MappedFile file, IndexHeader header, std::string path, std::string source)
    : file_(std::move(file)),
      header_(header),
      path_(std::move(path)),
      source_(std::move(source)),
      table_(file_.bytes().data() + kHeaderBytes),
      records_(table_ + blocks_of(header_.samples) * kBlockBytes),
      media_(records_ + header_.samples * kRecordBytes),
      checked_(std::make_unique<std::atomic<bool>[]>(blocks_of(header_.samples))) {}

Status MappedIndex::check_block(std::uint64_t b) const {
  const std::uint64_t first = b * kBlockRecords, end = std::min<std::uint64_t>(header_.samples, first + kBlockRecords);
  const auto refuse = [&](const std::string& why) {
    return Error(
        ErrorCode::kCorruptData,
        "block " + std::to_string(b) + " (samples " + std::to_string(first) + "-" + std::to_string(end - 1) + ")" + why,
        path_);
  };
  const std::uint64_t media_from = get_le(table_ + b * kBlockBytes + 8, 8);
  const std::uint64_t media_to = end < header_.samples ? get_le(table_ + (b + 1) * kBlockBytes + 8, 8) : header_.media;
  if (get_le(table_ + b * kBlockBytes, 4) != crc32_of(records_ + first * kRecordBytes, (end - first) * kRecordBytes)) {
    return refuse(" is damaged (CRC-32)");
  }
  if (get_le(table_ + b * kBlockBytes + 4, 4) !=
      crc32_of(media_ + media_from * kMediaBytes, (media_to - media_from) * kMediaBytes)) {
    return refuse(": its media entries are damaged (CRC-32)");
  }
  std::uint64_t next_media = media_from;
  for (std::uint64_t i = first; i < end; ++i) {
    const IndexRecord r = decode(i);
    if (r.offset < header_.text_start || r.offset > header_.source_size || r.length > header_.source_size - r.offset) {
      return refuse(": record " + std::to_string(i) + " lies outside " + source_);
    }
    if (r.first_media != next_media || r.media() > media_to - next_media) {
      return refuse(": record " + std::to_string(i) + "'s media are not where its entries lie");
    }
    next_media += r.media();
  }
  if (next_media != media_to) return refuse(": its records name fewer media than it holds");
  return {};
}

Result<IndexRecord> MappedIndex::record(std::uint64_t i) const {
  const std::uint64_t b = i / kBlockRecords;
  if (!checked_[b].load(std::memory_order_acquire)) {
    MMFEED_RETURN_IF_ERROR(check_block(b));
    if (!checked_[b].exchange(true, std::memory_order_acq_rel)) blocks_checked_.fetch_add(1, std::memory_order_relaxed);
  }
  return decode(i);
}

IndexRecord MappedIndex::decode(std::uint64_t i) const { return get_record(records_ + i * kRecordBytes); }

MediaFacts MappedIndex::media(std::uint64_t j) const { return get_media(media_ + j * kMediaBytes); }

void put_record(std::string& out, const IndexRecord& r) {
  put_le(out, r.offset, 8);
  put_le(out, r.number, 8);
  put_le(out, r.first_media, 8);
  put_le(out, r.length, 4);
  put_le(out, r.text_tokens, 4);
  put_le(out, r.images, 2);
  put_le(out, r.videos, 2);
  put_le(out, r.audio, 2);
  put_le(out, r.bad ? 1 : 0, 2);
}

void put_media(std::string& out, const MediaFacts& f) {
  put_le(out, f.width, 4);
  put_le(out, f.height, 4);
  put_le(out, f.duration_ms, 4);
  put_le(out, f.fps_centi, 2);
  put_le(out, static_cast<std::uint8_t>(f.kind), 1);
  put_le(out, static_cast<std::uint8_t>(f.known), 1);
}

IndexRecord get_record(const std::byte* at) {
  IndexRecord r;
  r.offset = get_le(at, 8);
  r.number = get_le(at + 8, 8);
  r.first_media = get_le(at + 16, 8);
  r.length = static_cast<std::uint32_t>(get_le(at + 24, 4));
  r.text_tokens = static_cast<std::uint32_t>(get_le(at + 28, 4));
  r.images = static_cast<std::uint16_t>(get_le(at + 32, 2));
  r.videos = static_cast<std::uint16_t>(get_le(at + 34, 2));
  r.audio = static_cast<std::uint16_t>(get_le(at + 36, 2));
  r.bad = (get_le(at + 38, 2) & 1) != 0;
  return r;
}

MediaFacts get_media(const std::byte* at) {
  MediaFacts f;
  f.width = static_cast<std::uint32_t>(get_le(at, 4));
  f.height = static_cast<std::uint32_t>(get_le(at + 4, 4));
  f.duration_ms = static_cast<std::uint32_t>(get_le(at + 8, 4));
  f.fps_centi = static_cast<std::uint16_t>(get_le(at + 12, 2));
  const auto kind = static_cast<std::uint8_t>(get_le(at + 14, 1));
  const auto known = static_cast<std::uint8_t>(get_le(at + 15, 1));
  f.kind = kind >= 1 && kind <= 3 ? static_cast<MediaFacts::Kind>(kind) : MediaFacts::Kind::kImage;
  f.known = known <= 2 ? static_cast<MediaFacts::Known>(known) : MediaFacts::Known::kUnreadable;
  return f;
}

}  // namespace dataset

Result<DatasetIndex> open_index(const std::string& path, const std::string& source) {
  MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(source));
  storage::S3Options s3;
  if (uri.scheme != storage::Scheme::kFile) {
    MMFEED_ASSIGN_OR_RETURN(s3, storage::s3_options_from_environment());
  }
  MMFEED_ASSIGN_OR_RETURN(const dataset::SourceStamp now, dataset::stamp_source(source, s3));
  MMFEED_ASSIGN_OR_RETURN(const auto mapped, dataset::MappedIndex::open(path, source, now));
  const dataset::IndexHeader& h = mapped->header();
  DatasetIndex index{h.source_size, h.source_mtime_ns, h.source_crc32, h.array, h.tokens_key, h.etag_crc, {}, {}};
  index.records.reserve(h.samples);
  for (std::uint64_t i = 0; i < h.samples; ++i) {
    MMFEED_ASSIGN_OR_RETURN(const IndexRecord r, mapped->record(i));
    index.records.push_back(r);
  }
  index.media.reserve(h.media);
  for (std::uint64_t j = 0; j < h.media; ++j) index.media.push_back(mapped->media(j));
  return index;
}

}  // namespace mmfeed
