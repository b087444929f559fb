// The dataset index as the manifest reader opens it (the format and its public face:
// include/mmfeed/index.h; built and read in index.cc): mapped, so the node's ranks hold its pages
// once, and checked a block at a time: the header and the block table when opened, a block of
// records and its media entries the first time one of its records is asked for. A rank reads the
// blocks of the samples it trains on, not the whole index.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(SourceStamp now, stamp_source(path, s3));
//   MMFEED_ASSIGN_OR_RETURN(auto index, MappedIndex::open(index_path_of(path), path, now));
//   MMFEED_ASSIGN_OR_RETURN(IndexRecord r, index->record(7));   // its block checked first
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/mapped_file.h"
#include "mmfeed/error.h"
#include "mmfeed/index.h"
#include "storage/credentials.h"

namespace mmfeed::dataset {

// Where a manifest's index is looked for beside it: "<file>.mmidx" (a local path, or an s3:// or
// http(s):// URI without a query).
std::string index_path_of(const std::string& file_path);

// Where a node cache (`cache_dir`) keeps the index of `source` (a local path or a URI): named by
// its absolute path or its URI without a query (hashed) and its file name, so two manifests of
// one name do not share one.
std::string cached_index_path(const std::string& cache_dir, const std::string& source);

// What an index is bound to: its source's size and version, now. A local file's modification
// time; a remote object's ETag (learned with its first bytes by one ranged GET).
struct SourceStamp {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;   // a local file's
  std::string etag;            // a remote object's, as its server sends it
  std::uint32_t etag_crc = 0;  // the CRC-32 of `etag` (never 0 where there is one): what the index keeps
  std::string head;            // its first bytes (at most 4): compressed? a byte-order mark?
  bool remote() const { return etag_crc != 0; }
};

// Whether a file whose first bytes are `head` is gzip or zstd (no byte range of its text can be read).
bool compressed(std::string_view head);

// `source`'s stamp: a local file's from stat (and its first bytes read), a remote object's from
// one ranged GET of its first bytes. kNotFound where there is none; kUnsupported for a remote
// object its server sends no ETag for (nothing to bind an index to).
Result<SourceStamp> stamp_source(const std::string& source, const storage::S3Options& s3);

struct IndexHeader {
  std::uint64_t samples = 0;
  std::uint64_t media = 0;  // media entries
  std::uint64_t source_size = 0;
  std::int64_t source_mtime_ns = 0;
  std::uint32_t source_crc32 = 0;
  std::uint32_t text_start = 0;  // 3 after a UTF-8 byte-order mark
  std::uint32_t tokens_key = 0;  // text_tokens_key() of what counted the text tokens; 0: not counted
  std::uint32_t etag_crc = 0;    // a remote source's: SourceStamp::etag_crc; 0: a local file
  bool array = false;
};

inline constexpr std::size_t kSummaryNamed = 100;  // bad samples, unreadable media, files named in a summary

inline constexpr std::size_t kRecordBytes = 40;  // a record's bytes in the index
inline constexpr std::size_t kMediaBytes = 16;   // a media entry's

// A record's and a media entry's bytes as the index holds them (include/mmfeed/index.h), appended
// to `out`; and read back from the bytes at `at`.
void put_record(std::string& out, const IndexRecord& r);
void put_media(std::string& out, const MediaFacts& f);
IndexRecord get_record(const std::byte* at);
MediaFacts get_media(const std::byte* at);

class MappedIndex {
 public:
  // The index at `path` of `source`, mapped; its header (magic, version, CRC-32, the sizes it
  // claims against the file's, `source`'s size and version against `now`, its stamp) and its
  // block table (CRC-32, where each block's media begin) checked before anything is trusted. An
  // error names `path` and what is wrong.
  static Result<std::shared_ptr<const MappedIndex>> open(const std::string& path, const std::string& source,
                                                         const SourceStamp& now);

  const IndexHeader& header() const { return header_; }
  std::uint64_t samples() const { return header_.samples; }
  // Record `i` (< samples()), its block checked first if no record of it was asked for before:
  // the block's records and media entries against their CRC-32, each record within the source and
  // its media where the entries lie. An error names the index and the block.
  Result<IndexRecord> record(std::uint64_t i) const;
  // Media entry `j` of a record record() returned (its block is checked).
  MediaFacts media(std::uint64_t j) const;
  std::size_t bytes() const { return file_.size(); }
  std::uint64_t blocks_checked() const { return blocks_checked_.load(std::memory_order_relaxed); }

  MappedIndex(core::MappedFile file, IndexHeader header, std::string path, std::string source);

 private:
  Status check_block(std::uint64_t b) const;
  IndexRecord decode(std::uint64_t i) const;

  core::MappedFile file_;
  IndexHeader header_;
  std::string path_, source_;
  const std::byte* table_;
  const std::byte* records_;
  const std::byte* media_;
  mutable std::unique_ptr<std::atomic<bool>[]> checked_;  // by block
  mutable std::atomic<std::uint64_t> blocks_checked_{0};
};

}  // namespace mmfeed::dataset
