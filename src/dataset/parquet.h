// Parquet files as a source of samples, as Hugging Face `datasets` writes them (`Image()`
// features: a struct<bytes: binary, path: string>, or a list of them, the image's bytes inline)
// and as pyarrow writes any table. Read with Apache Arrow's Parquet C++ reader, the libraries the
// pyarrow wheel ships (the reference implementation, maintained with the format).
//
// A row is a sample. Opening a source reads each file's footer, its page index and every column
// but the images' bytes (row group by row group), and writes each row as one JSON line of the
// manifest text: the columns as they are (a string column named "messages", "conversations" or
// "conversation" holding JSON text is that JSON), an image column as references to the row's
// cells ("images": ["images[0]", "images[1]"]), or to their paths when the file holds no bytes.
// The images' bytes are then fetched per sample as ranged reads of the data page holding the row
// (the page index says where: datasets writes one, uncompressed and PLAIN-encoded), the column's
// dictionary page with it when that page is dictionary-encoded, or the whole column chunk of the
// row group when the file has no page index; parquet_value() decodes the cell from those bytes.
// A source is one file or a brace pattern of them ("s3://b/train-{00000..00009}.parquet"), local,
// s3:// or http(s)://.
//
// Example:
//   std::vector<ManifestLine> lines;
//   MMFEED_ASSIGN_OR_RETURN(Manifest m, read_parquet("data/train-{0..3}.parquet", max_bytes, s3, 0, lines));
//   // m.text: one JSON object per row; m.samples[i].key: the row's number in its file
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "storage/credentials.h"

namespace mmfeed::dataset {

// Reads `files`, the files source `source` names (source_files.h), into one manifest, manifest
// number `manifest`, each row a sample (its line appended to `lines`). `limit` (max_manifest_bytes) bounds the columns
// read at open, as the footer states them and as they really decode (every Arrow allocation counted), and the text
// written from them, all files of the source together. Errors name the file (and the row group or row).
// A file with a current index beside it (parquet_index.h; `use_indexes`) is read from the index
// instead (its rows' text, its images' places): nothing of the file is read at open but the
// first bytes that stamp its version, and each image is then fetched alone; an index there that
// does not check out (the file changed since, the index damaged) is an error naming it. A remote
// file's index is fetched into the node cache `cache_dir` where one is given (once a node).
Result<Manifest> read_parquet(const std::string& source, const std::vector<std::string>& files, std::size_t limit,
                              const storage::S3Options& s3, std::uint32_t manifest, std::vector<ManifestLine>& lines,
                              bool use_indexes = true, const std::string& cache_dir = {});

// Cell `cell`'s bytes decoded from `pages`, the bytes of its MediaSource's range: appended to
// `out`, their place in it returned. A null cell, or pages that do not hold the cell's row, are
// errors (kCorruptData) naming the column and the row; pages that decompress (or a value that
// decodes) past `max_bytes` are refused when the decoder asks for the memory, before it is
// committed (kResourceExhausted).
Result<storage::ByteRange> parquet_value(const ParquetCell& cell, std::span<const std::byte> pages,
                                         std::uint64_t max_bytes, std::vector<std::byte>& out);

// Where cell `cell`'s bytes lie in `pages` as they are stored (an uncompressed, PLAIN-encoded
// page holds each value as it is): what an index keeps so that a sample fetches its image alone.
// nullopt where the page is compressed or the value decoded (no byte range of the file is the
// image). Errors as parquet_value's.
Result<std::optional<storage::ByteRange>> parquet_value_place(const ParquetCell& cell, std::span<const std::byte> pages,
                                                              std::uint64_t max_bytes);

}  // namespace mmfeed::dataset
