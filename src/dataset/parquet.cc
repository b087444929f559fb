// One file of about 700 lines, on purpose: its two halves share Arrow types (below) that a split
// would export through a header. (A file's index is read in parquet_index.cc, found here.)
//
// Parquet sources (parquet.h): a source's files opened (footer, page index, the columns read at
// open, each row written as a JSON line) and a cell decoded from its fetched pages. Both halves
// read the same column chunk's page layout (ChunkPages) and report the same decoding limits
// (LimitedPool's refusals).
#include "dataset/parquet.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/io/memory.h>
#include <parquet/arrow/reader.h>
#include <parquet/column_reader.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/page_index.h>
#include <parquet/statistics.h>
#include <zlib.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>

#include "dataset/arrow_file.h"
#include "dataset/arrow_json.h"
#include "dataset/arrow_pool.h"
#include "dataset/index.h"
#include "dataset/parquet_index.h"
#include "dataset/shards.h"
#include "mmfeed/json.h"
#include "storage/fetcher.h"
#include "storage/redact.h"

namespace mmfeed::dataset {

struct ParquetChunk {
  std::shared_ptr<parquet::FileMetaData> meta;  // owns descr
  const parquet::ColumnDescriptor* descr = nullptr;
  parquet::Compression::type codec = parquet::Compression::UNCOMPRESSED;
  std::int64_t num_values = 0;
  std::string column;  // the image column's name
};

namespace {

Error arrow_error(const arrow::Status& s, const std::string& where) {
  return Error(s.IsIOError() ? ErrorCode::kUnavailable : ErrorCode::kCorruptData, s.message(), where);
}

// Where the pages of an image column chunk lie, and the ranges a row's cell is read from.
struct ChunkPages {
  std::vector<parquet::PageLocation> pages;  // empty: the file has no page index
  std::uint64_t chunk_begin = 0, chunk_end = 0;
  std::optional<std::uint64_t> dictionary;  // the dictionary page's offset
  std::size_t dictionary_pages = 0;         // data pages that are dictionary-encoded (the first ones)

  // The range holding `row`, and the row its first data page starts with.
  std::pair<storage::ByteRange, std::uint64_t> range_of(std::uint64_t row) const {
    if (pages.empty()) return {{chunk_begin, chunk_end - chunk_begin}, 0};
    auto it = std::upper_bound(pages.begin(), pages.end(), row, [](std::uint64_t r, const parquet::PageLocation& p) {
      return static_cast<std::int64_t>(r) < p.first_row_index;
    });
    const std::size_t p = it == pages.begin() ? 0 : static_cast<std::size_t>(it - pages.begin()) - 1;
    const auto begin = static_cast<std::uint64_t>(pages[p].offset);
    const std::uint64_t end = begin + static_cast<std::uint64_t>(pages[p].compressed_page_size);
    if (dictionary && p < dictionary_pages) {
      return {{*dictionary, end - *dictionary}, static_cast<std::uint64_t>(pages.front().first_row_index)};
    }
    return {{begin, end - begin}, static_cast<std::uint64_t>(pages[p].first_row_index)};
  }
};

Result<ChunkPages> pages_of(parquet::ParquetFileReader& file, const parquet::ColumnChunkMetaData& chunk, int row_group,
                            int leaf, const std::string& where) {
  ChunkPages out;
  const auto data = static_cast<std::uint64_t>(chunk.data_page_offset());
  out.chunk_begin = data;
  if (chunk.has_dictionary_page() && chunk.dictionary_page_offset() > 0) {
    out.dictionary = static_cast<std::uint64_t>(chunk.dictionary_page_offset());
    out.chunk_begin = std::min(data, *out.dictionary);
  }
  out.chunk_end = out.chunk_begin + static_cast<std::uint64_t>(chunk.total_compressed_size());
  if (chunk.GetOffsetIndexLocation()) {
    auto index = file.GetPageIndexReader();
    if (auto rg = index ? index->RowGroup(row_group) : nullptr) {
      if (auto offsets = rg->GetOffsetIndex(leaf)) out.pages = offsets->page_locations();
    }
  }
  for (const parquet::PageLocation& p : out.pages) {
    if (p.offset < 0 || p.compressed_page_size <= 0 || static_cast<std::uint64_t>(p.offset) < out.chunk_begin ||
        static_cast<std::uint64_t>(p.offset) + static_cast<std::uint64_t>(p.compressed_page_size) > out.chunk_end) {
      return Error(ErrorCode::kCorruptData, "the page index places a page outside its column chunk", where);
    }
  }
  if (out.dictionary) {
    out.dictionary_pages = out.pages.size();  // unless the page encodings say fewer
    if (!chunk.encoding_stats().empty()) {
      out.dictionary_pages = 0;
      for (const parquet::PageEncodingStats& s : chunk.encoding_stats()) {
        const bool data_page =
            s.page_type == parquet::PageType::DATA_PAGE || s.page_type == parquet::PageType::DATA_PAGE_V2;
        if (data_page &&
            (s.encoding == parquet::Encoding::PLAIN_DICTIONARY || s.encoding == parquet::Encoding::RLE_DICTIONARY)) {
          out.dictionary_pages += static_cast<std::size_t>(s.count);
        }
      }
    }
  }
  return out;
}

// The bytes a leaf column's `values` take once decoded, past its pages' own bytes: a fixed-width
// value's width, a string's offset (or, read as a dictionary, its index). A run-length or
// dictionary page states a million values in a few bytes.
std::uint64_t decoded_bytes_per_value(const parquet::ColumnDescriptor& column) {
  switch (column.physical_type()) {
    case parquet::Type::BOOLEAN: return 1;
    case parquet::Type::INT32:
    case parquet::Type::FLOAT:
    case parquet::Type::BYTE_ARRAY: return 4;
    case parquet::Type::INT96: return 12;
    case parquet::Type::FIXED_LEN_BYTE_ARRAY: return static_cast<std::uint64_t>(std::max(column.type_length(), 1));
    default: return 8;
  }
}

// Whether the chunk holds data pages that are not dictionary-encoded, as its encoding stats say
// (a writer that states none: taken as holding none).
bool has_plain_data_pages(const parquet::ColumnChunkMetaData& chunk) {
  for (const parquet::PageEncodingStats& s : chunk.encoding_stats()) {
    const bool data_page =
        s.page_type == parquet::PageType::DATA_PAGE || s.page_type == parquet::PageType::DATA_PAGE_V2;
    if (data_page && s.count > 0 && s.encoding != parquet::Encoding::PLAIN_DICTIONARY &&
        s.encoding != parquet::Encoding::RLE_DICTIONARY) {
      return true;
    }
  }
  return false;
}

// The error for a file whose decoding `pool` refused: its columns (or image pages) decode to
// more than the limit, whatever their encoded sizes said.
Error decoded_too_large(const LimitedPool& pool, const std::string& what, const std::string& option,
                        const std::string& where) {
  return Error(ErrorCode::kResourceExhausted,
               what + " decode to more than " + option + " (" + std::to_string(pool.limit()) +
                   " bytes: " + std::to_string(pool.refused()) + " asked for); split it, or raise the limit",
               where);
}

// The files of one source, read into `m`. `pool` holds what Arrow decodes, for all the source's
// files at once, within max_manifest_bytes.
class ParquetReader {
 public:
  ParquetReader(Manifest& m, std::size_t limit, LimitedPool& pool, std::uint32_t manifest,
                std::vector<ManifestLine>& lines)
      : m_(m), limit_(limit), pool_(pool), manifest_(manifest), lines_(lines) {}

  Status read_file(std::uint32_t index, std::shared_ptr<arrow::io::RandomAccessFile> source, const std::string& name) {
    Status st = ok_status();
    try {
      st = read_file_or_throw(index, std::move(source), name);
    } catch (const std::exception& e) {  // parquet reports damage by exceptions
      st = Error(ErrorCode::kCorruptData, e.what(), name);
    }
    if (!st.ok() && pool_.refused() > 0) {
      return decoded_too_large(pool_, "its columns other than the images' bytes", "max_manifest_bytes", name);
    }
    return st;
  }

 private:
  struct Column {
    int field = 0;
    std::string name;
    ImageColumn image = ImageColumn::kNone;
    int bytes_leaf = -1;  // an image column's bytes
  };

  Status read_file_or_throw(std::uint32_t index, std::shared_ptr<arrow::io::RandomAccessFile> source,
                            const std::string& name) {
    MMFEED_RETURN_IF_ERROR(check_footer(*source, name));
    std::unique_ptr<parquet::ParquetFileReader> file =
        parquet::ParquetFileReader::Open(std::move(source), parquet::ReaderProperties(&pool_));
    const std::shared_ptr<parquet::FileMetaData> meta = file->metadata();
    parquet::ParquetFileReader& raw = *file;
    auto made = parquet::arrow::FileReader::Make(&pool_, std::move(file), dictionary_reads(*meta));
    if (!made.ok()) return arrow_error(made.status(), name);
    std::unique_ptr<parquet::arrow::FileReader> reader = std::move(made).ValueOrDie();
    std::shared_ptr<arrow::Schema> schema;
    if (auto s = reader->GetSchema(&schema); !s.ok()) return arrow_error(s, name);
    std::vector<Column> columns;
    const std::vector<int> leaves = plan_columns(*schema, *meta->schema(), columns);
    MMFEED_RETURN_IF_ERROR(bound_read_bytes(*meta, leaves, name));
    std::uint64_t file_row = 0;
    for (int g = 0; g < meta->num_row_groups(); ++g) {
      const std::string where = name + " (row group " + std::to_string(g) + ")";
      auto read = reader->ReadRowGroup(g, leaves);
      if (!read.ok()) return arrow_error(read.status(), where);
      auto combined = (*read)->CombineChunks();
      if (!combined.ok()) return arrow_error(combined.status(), where);
      const std::shared_ptr<arrow::Table> table = *combined;
      ImageChunks images(columns.size());
      MMFEED_RETURN_IF_ERROR(image_chunks(raw, meta, g, columns, where, images));
      MMFEED_RETURN_IF_ERROR(check_strings(*table, where));
      for (std::int64_t r = 0; r < table->num_rows(); ++r, ++file_row) {
        MMFEED_RETURN_IF_ERROR(write_row(index, file_row, static_cast<std::uint64_t>(r), *table, columns, images.pages,
                                         images.chunk_ids, images.embedded, name));
      }
    }
    return ok_status();
  }

  // Strings stored by dictionary alone are read as a dictionary: a value that every row refers
  // to is held once, as the file holds it, not once a row. (A chunk that fell back to PLAIN
  // pages, as writers do once the dictionary grows, is read densely: faster, and its pages
  // state their own sizes; the pool still counts what it decodes to.)
  static parquet::ArrowReaderProperties dictionary_reads(const parquet::FileMetaData& meta) {
    parquet::ArrowReaderProperties properties;
    for (int g = 0; g < meta.num_row_groups(); ++g) {
      const auto rg = meta.RowGroup(g);
      for (int c = 0; c < rg->num_columns(); ++c) {
        const auto chunk = rg->ColumnChunk(c);
        if (meta.schema()->Column(c)->physical_type() == parquet::Type::BYTE_ARRAY && chunk->has_dictionary_page() &&
            !has_plain_data_pages(*chunk)) {
          properties.set_read_dictionary(c, true);
        }
      }
    }
    return properties;
  }

  // The file's top-level columns (into `columns`, each image column with its bytes' leaf), and
  // the leaves read at open: every leaf but the images' bytes.
  static std::vector<int> plan_columns(const arrow::Schema& schema, const parquet::SchemaDescriptor& pschema,
                                       std::vector<Column>& columns) {
    for (int f = 0; f < schema.num_fields(); ++f) {
      columns.push_back({f, schema.field(f)->name(), image_column(*schema.field(f)->type()), -1});
    }
    std::vector<int> leaves;
    for (int c = 0; c < pschema.num_columns(); ++c) {
      const std::vector<std::string> path = pschema.Column(c)->path()->ToDotVector();
      auto col = std::find_if(columns.begin(), columns.end(), [&](const Column& x) { return x.name == path.front(); });
      if (col != columns.end() && col->image != ImageColumn::kNone && path.back() == "bytes") {
        col->bytes_leaf = c;
      } else {
        leaves.push_back(c);
      }
    }
    return leaves;
  }

  // The columns read at open are bounded before they are read: their pages' bytes, and what
  // their values take decoded (the pool then counts what decoding really holds).
  Status bound_read_bytes(const parquet::FileMetaData& meta, const std::vector<int>& leaves, const std::string& name) {
    for (int g = 0; g < meta.num_row_groups(); ++g) {
      const auto rg = meta.RowGroup(g);
      for (int c : leaves) {
        const auto chunk = rg->ColumnChunk(c);
        read_bytes_ += static_cast<std::uint64_t>(std::max<std::int64_t>(0, chunk->total_uncompressed_size())) +
                       static_cast<std::uint64_t>(std::max<std::int64_t>(0, chunk->num_values())) *
                           decoded_bytes_per_value(*meta.schema()->Column(c));
      }
    }
    if (read_bytes_ > limit_) {
      return Error(ErrorCode::kResourceExhausted,
                   "its columns other than the images' bytes hold " + std::to_string(read_bytes_) +
                       " bytes decoded, more than max_manifest_bytes (" + std::to_string(limit_) +
                       "); split it, or raise the limit",
                   name);
    }
    return ok_status();
  }

  // A row group's image column chunks, by column: their pages, their place in m_.chunks, and
  // whether they hold bytes at all.
  struct ImageChunks {
    explicit ImageChunks(std::size_t columns) : pages(columns), chunk_ids(columns), embedded(columns) {}
    std::vector<std::optional<ChunkPages>> pages;
    std::vector<std::uint32_t> chunk_ids;
    std::vector<bool> embedded;
  };

  Status image_chunks(parquet::ParquetFileReader& raw, const std::shared_ptr<parquet::FileMetaData>& meta, int g,
                      const std::vector<Column>& columns, const std::string& where, ImageChunks& out) {
    const auto rg = meta->RowGroup(g);
    for (std::size_t k = 0; k < columns.size(); ++k) {
      const Column& col = columns[k];
      if (col.bytes_leaf < 0) continue;
      const auto chunk = rg->ColumnChunk(col.bytes_leaf);
      const auto stats = chunk->is_stats_set() ? chunk->statistics() : nullptr;
      out.embedded[k] = !(stats && stats->HasNullCount() && stats->null_count() >= chunk->num_values());
      if (!out.embedded[k]) continue;
      MMFEED_ASSIGN_OR_RETURN(out.pages[k], pages_of(raw, *chunk, g, col.bytes_leaf, where));
      auto shared = std::make_shared<ParquetChunk>();
      shared->meta = meta;
      shared->descr = meta->schema()->Column(col.bytes_leaf);
      shared->codec = chunk->compression();
      shared->num_values = chunk->num_values();
      shared->column = col.name;
      out.chunk_ids[k] = static_cast<std::uint32_t>(m_.chunks.size());
      m_.chunks.push_back(std::move(shared));
    }
    return ok_status();
  }

  // The row group's text, at least its strings as written out, is checked before any of it
  // is: a few bytes of dictionary indices may stand for gigabytes of repeated values.
  Status check_strings(const arrow::Table& table, const std::string& where) const {
    std::uint64_t strings = 0;
    for (const auto& column : table.columns()) {
      for (const auto& chunk : column->chunks()) strings += written_string_bytes(*chunk);
    }
    if (strings > static_cast<std::uint64_t>(std::max<std::int64_t>(0, pool_.left()))) {
      return Error(ErrorCode::kResourceExhausted,
                   "its rows hold " + std::to_string(strings) +
                       " bytes of strings written out, more than max_manifest_bytes (" + std::to_string(limit_) +
                       ") leaves; split it, or raise the limit",
                   where);
    }
    return ok_status();
  }

  // The file ends with "PAR1" after a footer length within the limit: checked before Arrow
  // commits memory for the footer.
  Status check_footer(arrow::io::RandomAccessFile& file, const std::string& name) const {
    auto size = file.GetSize();
    if (!size.ok()) return arrow_error(size.status(), name);
    if (*size < 12)
      return Error(ErrorCode::kCorruptData, "not a Parquet file (" + std::to_string(*size) + " bytes)", name);
    auto tail = file.ReadAt(*size - 8, 8);
    if (!tail.ok()) return arrow_error(tail.status(), name);
    const std::uint8_t* t = (*tail)->data();
    if ((*tail)->size() != 8 || std::string_view(reinterpret_cast<const char*>(t + 4), 4) != "PAR1") {
      return Error(ErrorCode::kCorruptData, "not a Parquet file (it does not end with PAR1)", name);
    }
    const std::uint32_t footer = t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<std::uint32_t>(t[3]) << 24);
    if (footer > limit_ || footer > static_cast<std::uint64_t>(*size) - 12) {
      return Error(footer > limit_ ? ErrorCode::kResourceExhausted : ErrorCode::kCorruptData,
                   "its footer says it is " + std::to_string(footer) + " bytes, more than " +
                       (footer > limit_ ? "max_manifest_bytes (" + std::to_string(limit_) + ")"
                                        : "the file holds (" + std::to_string(*size) + " bytes)"),
                   name);
    }
    return ok_status();
  }

  // Row `row` (of its row group; `file_row` of its file) as one JSON line, its cells as members.
  Status write_row(std::uint32_t file, std::uint64_t file_row, std::uint64_t row, const arrow::Table& table,
                   const std::vector<Column>& columns, const std::vector<std::optional<ChunkPages>>& pages,
                   const std::vector<std::uint32_t>& chunk_ids, const std::vector<bool>& embedded,
                   const std::string& name) {
    std::string& out = m_.text;
    const std::size_t start = out.size();
    // The row may take what the source's pool has left: its files' text and what Arrow decodes
    // for them share max_manifest_bytes.
    const std::size_t row_limit = start + static_cast<std::size_t>(std::max<std::int64_t>(0, pool_.left()));
    ShardSample sample{std::to_string(file_row), file, 0, m_.members.size(), std::nullopt};
    const auto r = static_cast<std::int64_t>(row);
    out += '{';
    bool first = true;
    for (std::size_t k = 0; k < columns.size(); ++k) {
      const Column& col = columns[k];
      const std::shared_ptr<arrow::ChunkedArray> data = table.GetColumnByName(col.name);
      if (!data || data->num_chunks() != 1) continue;
      const arrow::Array& a = *data->chunk(0);
      if (!first) out += ',';
      first = false;
      append_json_string(out, col.name);
      out += ':';
      if (col.image == ImageColumn::kNone) {
        // Checked before each value is copied: a row's cells decode to what the footer never said.
        bool within = true;
        if (auto text = is_conversation_column(col.name) ? json_text_of(a, r) : std::nullopt) {
          within = text->size() <= row_limit - std::min(row_limit, out.size());
          if (within) out += *text;
        } else {
          within = append_json_value(out, a, r, row_limit);
        }
        if (!within) return rows_too_large(name + "[" + std::to_string(file_row) + "]");
        continue;
      }
      // An image column as read: struct<path>, or a list of them.
      const auto [structs, begin, count] = row_images(a, col.image, r);
      const std::shared_ptr<arrow::Array> path = structs->GetFieldByName("path");
      if (col.image == ImageColumn::kList) out += '[';
      if (count == 0 && col.image == ImageColumn::kOne) out += "null";
      for (std::int64_t e = 0; e < count; ++e) {
        if (e > 0) out += ',';
        if (!embedded[k]) {  // the file holds paths only
          if (path && !structs->IsNull(begin + e)) {
            if (!append_json_value(out, *path, begin + e, row_limit)) {
              return rows_too_large(name + "[" + std::to_string(file_row) + "]");
            }
          } else {
            out += "null";
          }
          continue;
        }
        const std::string ref = col.image == ImageColumn::kList ? col.name + "[" + std::to_string(e) + "]" : col.name;
        append_json_string(out, ref);
        const auto [range, first_row] = pages[k]->range_of(row);
        m_.members.push_back({ref, range.offset, range.length});
        m_.cells.push_back({chunk_ids[k], static_cast<std::uint32_t>(e), first_row, row, std::nullopt});
        ++sample.member_count;
      }
      if (col.image == ImageColumn::kList) out += ']';
    }
    return rows().end_row(out, start, row_limit, std::move(sample), name + "[" + std::to_string(file_row) + "]");
  }

  JsonRows rows() const { return {m_, limit_, pool_, manifest_, lines_}; }
  Error rows_too_large(const std::string& where) const { return rows().too_large(where); }

  Manifest& m_;
  const std::size_t limit_;
  LimitedPool& pool_;
  const std::uint32_t manifest_;
  std::vector<ManifestLine>& lines_;
  std::uint64_t read_bytes_ = 0;  // of the columns read at open
};

// One file read on its own (its rows numbered from 0, its cells' chunks its own), merged later.
struct FilePart {
  Manifest rows;
  std::vector<ManifestLine> lines;
  std::shared_ptr<const IndexedText> text;  // its rows' text where it lies in its local index (else rows.text)
  std::uint32_t text_crc = 0;               // of that text (with `text`)
  Status status = ok_status();
};

// The rows `indexed` read from a file's index, as that file's part.
void take_index(IndexedRows&& indexed, FilePart& part) {
  part.rows = std::move(indexed.rows);
  part.lines = std::move(indexed.lines);
  part.text = std::move(indexed.text);
  part.text_crc = indexed.text_crc;
}

// What reading each file of a source takes.
struct FileReading {
  std::size_t limit;
  LimitedPool& pool;
  const storage::S3Options& s3;
  std::uint32_t manifest;
  bool use_indexes;
  const std::string& cache_dir;  // a remote file's index is fetched into this node cache (empty: none)
};

void read_part_or_throw(const std::string& path, const FileReading& how, FilePart& part) {
  const std::size_t limit = how.limit;
  auto uri = storage::parse_uri(path);
  if (!uri.ok()) {
    part.status = uri.error();
    return;
  }
  const std::string name = storage::redact_uri(path);
  if (how.use_indexes) {
    auto indexed = read_index_beside(path, limit, how.s3, how.manifest, how.cache_dir);
    if (!indexed.ok() || *indexed) {
      part.status = indexed.ok() ? ok_status() : Status(std::move(indexed).error());
      if (indexed.ok()) take_index(std::move(**indexed), part);
      part.rows.shards.push_back(Shard{std::move(uri).value(), name});
      return;
    }
  }
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = limit;
  storage::Fetcher fetcher(options, how.s3);
  auto file = open_arrow_file(*uri, name, fetcher);
  if (!file.ok()) {
    part.status = file.error();
    return;
  }
  part.status =
      ParquetReader(part.rows, limit, how.pool, how.manifest, part.lines).read_file(0, std::move(file).value(), name);
  part.rows.shards.push_back(Shard{std::move(uri).value(), name});
}

// One file read on a thread of its own: what it cannot get (a thread of the fetcher, memory) is
// its error, not the process's end.
void read_part(const std::string& path, const FileReading& how, FilePart& part) {
  try {
    read_part_or_throw(path, how, part);
  } catch (const std::exception& e) {
    part.status =
        Error(ErrorCode::kResourceExhausted, std::string("cannot read it: ") + e.what(), storage::redact_uri(path));
  }
}

// The rows' text of a source's files, as merged: the files' texts in order, each held or (read
// from a local index) where it lies; `m.text` accumulates the held ones since the last that lies.
struct MergedText {
  std::vector<std::shared_ptr<const IndexedText>> texts;
  std::uint64_t size = 0, held = 0;  // all of it; what is held in memory
  uLong crc = crc32_z(0, nullptr, 0);
};

// The text `m` holds since the last that lies in an index, handed to `text` as one piece.
void hand_over_held(Manifest& m, MergedText& text) {
  if (!m.text.empty()) text.texts.push_back(std::make_shared<MemoryText>(m.name, std::move(m.text)));
  m.text.clear();
}

// `part` (file number `file`) appended to `m`: text, lines, samples, members, cells and chunks
// renumbered.
void merge(Manifest& m, std::uint32_t file, FilePart& part, std::vector<ManifestLine>& lines, MergedText& text) {
  const std::uint64_t base = text.size, sample = m.samples.size(), member = m.members.size();
  const auto chunk = static_cast<std::uint32_t>(m.chunks.size());
  if (part.text) {
    hand_over_held(m, text);
    text.texts.push_back(part.text);
    text.crc = crc32_combine(text.crc, part.text_crc, static_cast<z_off_t>(part.text->size()));
    text.size += part.text->size();
  } else {
    const std::string& t = part.rows.text;
    const uLong crc = crc32_z(0, reinterpret_cast<const Bytef*>(t.data()), t.size());
    text.crc = crc32_combine(text.crc, crc, static_cast<z_off_t>(t.size()));
    text.size += t.size();
    text.held += t.size();
    m.text += t;
  }
  for (ManifestLine line : part.lines) {
    line.offset += base;
    line.number += sample;
    lines.push_back(line);
  }
  for (ShardSample& s : part.rows.samples) {
    s.shard = file;
    s.first_member += member;
    m.samples.push_back(std::move(s));
  }
  m.members.insert(m.members.end(), part.rows.members.begin(), part.rows.members.end());
  for (CellPlace c : part.rows.cells) {
    c.chunk += chunk;
    m.cells.push_back(c);
  }
  m.chunks.insert(m.chunks.end(), part.rows.chunks.begin(), part.rows.chunks.end());
  m.shards.push_back(std::move(part.rows.shards.front()));
  m.remote = m.remote || m.shards.back().uri.scheme != storage::Scheme::kFile;
  part = FilePart{};
}

}  // namespace

Result<Manifest> read_parquet(const std::string& source, const std::vector<std::string>& names, std::size_t limit,
                              const storage::S3Options& s3, std::uint32_t manifest, std::vector<ManifestLine>& lines,
                              bool use_indexes, const std::string& cache_dir) {
  Manifest m;
  m.name = storage::redact_uri(source);
  m.parquet = true;
  // What reading the source holds at once -- its rows' text and the row groups being decoded,
  // counted as Arrow allocates them -- stays within max_manifest_bytes.
  LimitedPool pool(static_cast<std::int64_t>(std::min<std::uint64_t>(limit, INT64_MAX)));
  // Files are opened kFilesAtOnce at a time, each on a thread of its own (a remote file's footer,
  // page index and columns are several reads, one after another), and merged in order.
  constexpr std::size_t kFilesAtOnce = 16;
  // A remote set's first file's index is looked for alone: where it has none, neither is looked
  // for beside the others (a set without indexes costs one GET, not one a file).
  std::optional<IndexedRows> first_index;
  const auto remote = [&](const std::string& name) {
    auto uri = storage::parse_uri(name);
    return uri.ok() && uri->scheme != storage::Scheme::kFile;
  };
  if (use_indexes && !names.empty() && remote(names[0])) {
    MMFEED_ASSIGN_OR_RETURN(first_index, read_index_beside(names[0], limit, s3, manifest, cache_dir));
    use_indexes = first_index.has_value();
  }
  const FileReading how{limit, pool, s3, manifest, use_indexes, cache_dir};
  MergedText text;
  for (std::size_t first = 0; first < names.size(); first += kFilesAtOnce) {
    const std::size_t count = std::min(kFilesAtOnce, names.size() - first);
    std::vector<FilePart> parts(count);
    std::vector<std::thread> threads;
    Status started = ok_status();
    for (std::size_t k = 0; k < count; ++k) {
      if (first + k == 0 && first_index) {
        take_index(std::move(*first_index), parts[0]);
        MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(names[0]));
        parts[0].rows.shards.push_back(Shard{std::move(uri), storage::redact_uri(names[0])});
        continue;
      }
      try {
        threads.emplace_back(read_part, std::cref(names[first + k]), std::cref(how), std::ref(parts[k]));
      } catch (const std::system_error& e) {
        started = Error(ErrorCode::kResourceExhausted, std::string("cannot start a thread: ") + e.what(), m.name);
        break;
      }
    }
    for (std::thread& t : threads) t.join();
    MMFEED_RETURN_IF_ERROR(started);
    for (std::size_t k = 0; k < count; ++k) {
      MMFEED_RETURN_IF_ERROR(parts[k].status);
      merge(m, static_cast<std::uint32_t>(first + k), parts[k], lines, text);
      if (text.held > limit) {
        return Error(ErrorCode::kResourceExhausted,
                     "its rows written as JSON pass max_manifest_bytes (" + std::to_string(limit) +
                         "); split it, or raise the limit",
                     m.name);
      }
    }
  }
  if (!text.texts.empty()) {  // some files' text lies in their index: all read through one view
    hand_over_held(m, text);
    m.indexed = std::make_shared<SegmentedText>(m.name, std::move(text.texts));
  }
  // The fingerprint covers the rows (the same CRC-32 however their text is held) and where their
  // cells are.
  uLong crc = text.crc;
  for (const ShardMember& member : m.members) {
    const std::uint64_t place[2] = {member.offset, member.size};
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(place), sizeof place);
  }
  m.crc32 = static_cast<std::uint32_t>(crc);
  return m;
}

namespace {

// Finds cell `cell` in `pages` and hands its bytes to `use` (while the decoded pages live). A null
// cell, or pages that do not hold the cell's row, are errors naming the column and the row;
// pages that decompress past `max_bytes` are refused when the decoder asks for the memory.
Status with_value(const ParquetCell& cell, std::span<const std::byte> pages, std::uint64_t max_bytes,
                  const std::function<Status(const parquet::ByteArray&)>& use) {
  const ParquetChunk& chunk = *cell.chunk;
  const std::string where = chunk.column + " of row " + std::to_string(cell.row);
  // The decompressed pages and the decoded values: a page's header may say it inflates a
  // thousandfold, and the decompressor is handed a buffer of that size.
  LimitedPool pool(static_cast<std::int64_t>(std::min<std::uint64_t>(max_bytes, INT64_MAX)));
  const auto refused = [&] { return decoded_too_large(pool, "its pages", "max_object_bytes", where); };
  try {
    auto stream = std::make_shared<arrow::io::BufferReader>(std::make_shared<arrow::Buffer>(
        reinterpret_cast<const std::uint8_t*>(pages.data()), static_cast<std::int64_t>(pages.size())));
    std::unique_ptr<parquet::PageReader> pager = parquet::PageReader::Open(
        stream, chunk.num_values, chunk.codec, parquet::ReaderProperties(&pool), *chunk.descr);
    std::shared_ptr<parquet::ColumnReader> column = parquet::ColumnReader::Make(chunk.descr, std::move(pager), &pool);
    auto& reader = static_cast<parquet::ByteArrayReader&>(*column);
    const std::int16_t max_def = chunk.descr->max_definition_level(), max_rep = chunk.descr->max_repetition_level();
    const std::uint64_t target = cell.row - cell.first_row;
    constexpr std::int64_t kBatch = 256;
    std::int16_t def[kBatch], rep[kBatch];
    parquet::ByteArray values[kBatch];
    std::uint64_t record = 0;
    bool started = false;
    std::uint32_t element = 0;
    while (reader.HasNext()) {
      std::int64_t n_values = 0;
      const std::int64_t levels = reader.ReadBatch(kBatch, def, rep, values, &n_values);
      std::int64_t v = 0;
      for (std::int64_t l = 0; l < levels; ++l) {
        if (max_rep == 0 || rep[l] == 0) {
          if (started) ++record;
          started = true;
          element = 0;
        } else {
          ++element;
        }
        const bool present = max_def == 0 || def[l] == max_def;
        if (record > target) break;
        if (record == target && element == cell.element) {
          if (!present) return Error(ErrorCode::kCorruptData, "the image's bytes are null", where);
          const parquet::ByteArray& b = values[v];
          if (b.len > max_bytes) {
            return Error(ErrorCode::kResourceExhausted,
                         "the image's bytes are " + std::to_string(b.len) + ", more than max_object_bytes (" +
                             std::to_string(max_bytes) + ")",
                         where);
          }
          return use(b);
        }
        if (present) ++v;
      }
      if (record > target) break;
    }
    return Error(ErrorCode::kCorruptData,
                 "its pages hold no element " + std::to_string(cell.element) + " of the row (" +
                     std::to_string(started ? record + 1 : 0) + " rows from row " + std::to_string(cell.first_row) +
                     ")",
                 where);
  } catch (const std::exception& e) {
    if (pool.refused() > 0) return refused();
    return Error(ErrorCode::kCorruptData, e.what(), where);
  }
}

}  // namespace

Result<storage::ByteRange> parquet_value(const ParquetCell& cell, std::span<const std::byte> pages,
                                         std::uint64_t max_bytes, std::vector<std::byte>& out) {
  storage::ByteRange place;
  MMFEED_RETURN_IF_ERROR(with_value(cell, pages, max_bytes, [&](const parquet::ByteArray& b) {
    place = {out.size(), b.len};
    const auto* p = reinterpret_cast<const std::byte*>(b.ptr);
    out.insert(out.end(), p, p + b.len);
    return ok_status();
  }));
  return place;
}

Result<std::optional<storage::ByteRange>> parquet_value_place(const ParquetCell& cell, std::span<const std::byte> pages,
                                                              std::uint64_t max_bytes) {
  std::optional<storage::ByteRange> place;
  MMFEED_RETURN_IF_ERROR(with_value(cell, pages, max_bytes, [&](const parquet::ByteArray& b) {
    // Stored as it is, the value is a view of the fetched bytes themselves (an uncompressed,
    // PLAIN page is not copied by the reader); decompressed or decoded, it lies elsewhere.
    const auto* p = reinterpret_cast<const std::byte*>(b.ptr);
    if (p >= pages.data() && p + b.len <= pages.data() + pages.size()) {
      place = storage::ByteRange{static_cast<std::uint64_t>(p - pages.data()), b.len};
    }
    return ok_status();
  }));
  return place;
}

}  // namespace mmfeed::dataset
