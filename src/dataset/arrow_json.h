// Arrow values as JSON text: how a Parquet row (parquet.cc) becomes a manifest line. Numbers,
// booleans, strings, lists, structs (objects) and dictionary values; a type JSON has no form for
// (binary, temporal, ...) is null. A string column that holds a conversation as JSON text is
// written as that JSON.
//
// Example:
//   std::string line;
//   append_json_value(line, *table->column(0)->chunk(0), row, limit);  // "\"s7\"", 42, [1,2], {"a":1}, null
#pragma once

#include <arrow/array.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/arrow_pool.h"
#include "dataset/manifest.h"
#include "mmfeed/error.h"

namespace mmfeed::dataset {

// Value `i` of `a` as JSON, appended to `out`; false, with `out` cut short, as soon as `out`
// would pass `limit` bytes (a string is checked before it is copied: one dictionary value
// referenced by every row must not be copied past the limit first).
bool append_json_value(std::string& out, const arrow::Array& a, std::int64_t i, std::size_t limit);

// The bytes of the strings `a` holds as JSON writes them out -- a dictionary's value once for
// every row that refers to it -- counted without writing them: a lower bound of their text, to
// refuse a row group before its text is written.
std::uint64_t written_string_bytes(const arrow::Array& a);

// Value `i` of a string column (plain, or read as a dictionary) as raw JSON text when it is an
// object or a list, else nullopt.
std::optional<std::string_view> json_text_of(const arrow::Array& a, std::int64_t i);

// Whether a column of this name holds the conversation ("messages", "conversations", "conversation").
bool is_conversation_column(std::string_view name);

// An image column, as `datasets` writes an Image() feature: a struct<bytes: binary, path: string>,
// or a list of them.
enum class ImageColumn { kNone, kOne, kList };
ImageColumn image_column(const arrow::DataType& t);

// The images a row of an image column holds: `count` structs of `structs` from `begin`.
struct RowImages {
  const arrow::StructArray* structs = nullptr;
  std::int64_t begin = 0;
  std::int64_t count = 0;
};
RowImages row_images(const arrow::Array& column, ImageColumn kind, std::int64_t row);

// Where the rows of an Arrow file written as JSON lines go (parquet.cc, arrow_files.cc): the
// manifest's samples and lines, their text charged to the pool under max_manifest_bytes (`limit`).
struct JsonRows {
  Manifest& m;
  std::size_t limit;
  LimitedPool& pool;
  std::uint32_t manifest;
  std::vector<ManifestLine>& lines;

  // Ends the row written in `out` from `start`: its text charged to the pool (refused past
  // `row_limit` or what the pool has left), its line and sample recorded.
  Status end_row(std::string& out, std::size_t start, std::size_t row_limit, ShardSample sample,
                 const std::string& where) const;
  // The rows' text passes max_manifest_bytes.
  Error too_large(const std::string& where) const;
};

}  // namespace mmfeed::dataset
