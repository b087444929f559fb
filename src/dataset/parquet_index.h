// A Parquet file's index, "<file>.mmidx" beside it (`mmfeed index data-*.parquet`): the file's
// rows as the Loader reads them (each row's JSON line, parquet.h) and, for each embedded image,
// the byte range of its value in the file, found once when the index is built by decoding its
// data page: a sample then fetches its images' bytes alone, not the pages they lie in, and
// nothing of the file is read at open. Each image's width and height (its header) are kept too,
// the cost facts balancing reads. Bound to the file's size and modification time (a remote one's
// ETag), checksummed whole: a stale, foreign, truncated or tampered index is refused by name.
//
// Only a file whose images are stored as they are can be indexed: uncompressed, PLAIN-encoded
// pages (how Hugging Face `datasets` writes Image() columns). An image in a compressed or
// dictionary-encoded page has no byte range of its own; such a file is named and gets no index.
//
// The layout (little-endian):
//   header, 72 bytes: magic "mmfeedPQ", version (u32) 1, flags (u32) 0, rows (u64), images (u64),
//     text bytes (u64), name bytes (u64), the file's size (u64), its mtime in ns (i64; 0 remote),
//     the CRC-32 of a remote file's ETag (u32; 0 local), the CRC-32 of all that follows the
//     header (u32);
//   a row entry a row, 16 bytes: its text's offset (u64) and length (u32), its images (u32);
//   an image entry an image, in row order, 48 bytes: its data page's offset and length (u64 each:
//     where the Loader without index reads it), its value's offset and length (u64 each), its
//     width and height (u32 each; 0: its header unreadable), its name's offset and length in the
//     names (u32 each: "images[0]", as the row's JSON names it);
//   the rows' text (JSON lines), then the names.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(ParquetIndexBuilt b, write_parquet_index("train-0.parquet", "train-0.parquet.mmidx", s3));
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataset/index.h"
#include "dataset/indexed_text.h"
#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "storage/credentials.h"

namespace mmfeed::dataset {

struct ParquetIndexBuilt {
  std::uint64_t rows = 0, images = 0, bytes = 0;
  std::uint64_t unreadable = 0;  // images whose header could not be read (their size unknown)
};

// Indexes the Parquet file `file` (local, s3:// or http(s)://) into `out` (written whole, then
// renamed into place): its rows read as the Loader reads them, each image page fetched once (its
// images' places found in it, their headers read), the file's version checked before and after
// (a remote one's pages fetched If-Match its ETag). An error names the file: one it cannot read,
// one changed while read, one whose images lie in compressed or dictionary-encoded pages.
Result<ParquetIndexBuilt> write_parquet_index(const std::string& file, const std::string& out,
                                              const storage::S3Options& s3);

// The index `bytes` (named `where`) of the Parquet file stamped `now`, as read_parquet's rows of
// that one file (manifest number `manifest`, its rows numbered from 0): the text, samples and
// members the file read without its index gives (the same bytes, so the same fingerprint), each
// member's `value` set; `lines` appended. Every count is checked against the index's size before
// memory is committed, and the text against `limit`. An error names `where`: not a Parquet
// file's index, another version, truncated, damaged (CRC-32), built from another version of the
// file (its size, mtime or ETag).
// With `text`, the rows' text is not copied into rows.text: where it lies in `bytes` is written
// there (a mapped index's text read in place), and `limit` is not applied to it.
struct ParquetIndexText {
  std::uint64_t offset = 0, size = 0;
};
Status read_parquet_index(std::span<const std::byte> bytes, const std::string& where, const SourceStamp& now,
                          std::size_t limit, std::uint32_t manifest, Manifest& rows, std::vector<ManifestLine>& lines,
                          ParquetIndexText* text = nullptr);

// A Parquet file's rows read from the index beside it.
struct IndexedRows {
  Manifest rows;  // as read_parquet_index gives them; its text empty where `text` is set
  std::vector<ManifestLine> lines;
  std::shared_ptr<const IndexedText> text;  // a local index's rows' text, read where it lies
  std::uint32_t text_crc = 0;               // of the rows' text
};

// The rows of the Parquet file at `path` from the index beside it ("<path>.mmidx"): nullopt where
// there is none (a remote store's 403 taken as none: stores hide what is missing). A local index
// is mapped and checked whole, then its rows' text is read where it lies when a sample asks for
// it (the file held open; the node's ranks share its pages; not held, so `limit` does not bound
// it); a remote one is fetched whole and its text held (within `limit`), or, with a node cache
// (`cache_dir`), fetched once a node into it (the node's first reader, under a lock; kept while
// current) and read there as a local one. An error names the index, as read_parquet_index's do,
// or says it was replaced while it was read.
Result<std::optional<IndexedRows>> read_index_beside(const std::string& path, std::size_t limit,
                                                     const storage::S3Options& s3, std::uint32_t manifest,
                                                     const std::string& cache_dir = {});

}  // namespace mmfeed::dataset
