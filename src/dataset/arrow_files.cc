#include "dataset/arrow_files.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <zlib.h>

#include <cstring>

#include "dataset/arrow_json.h"
#include "dataset/arrow_pool.h"
#include "mmfeed/json.h"
#include "storage/redact.h"
#include "storage/uri.h"

namespace mmfeed::dataset {
namespace {

Error arrow_error(const arrow::Status& s, const std::string& where) {
  return Error(s.IsIOError() ? ErrorCode::kUnavailable : ErrorCode::kCorruptData, s.message(), where);
}

// One file's record batches into `m`, as file number `file`.
class ArrowFileReader {
 public:
  ArrowFileReader(Manifest& m, std::size_t limit, LimitedPool& pool, std::uint32_t manifest,
                  std::vector<ManifestLine>& lines)
      : m_(m), limit_(limit), pool_(pool), manifest_(manifest), lines_(lines) {}

  Status read(std::uint32_t file, const std::string& path, const std::string& name) {
    auto opened = arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ);
    if (!opened.ok()) return arrow_error(opened.status(), name);
    std::shared_ptr<arrow::io::MemoryMappedFile> mapped = *opened;
    auto size = mapped->GetSize();
    if (!size.ok()) return arrow_error(size.status(), name);
    auto whole = mapped->ReadAt(0, *size);  // the mapping itself: no copy
    if (!whole.ok()) return arrow_error(whole.status(), name);
    map_begin_ = (*whole)->data();
    map_end_ = map_begin_ + (*whole)->size();
    name_ = name;
    file_ = file;
    file_row_ = 0;
    arrow::ipc::IpcReadOptions options;
    options.memory_pool = &pool_;
    options.use_threads = false;
    if (*size >= 6 && std::memcmp(map_begin_, "ARROW1", 6) == 0) {
      auto reader = arrow::ipc::RecordBatchFileReader::Open(mapped, options);
      if (!reader.ok()) return arrow_error(reader.status(), name);
      for (int b = 0; b < (*reader)->num_record_batches(); ++b) {
        auto batch = (*reader)->ReadRecordBatch(b);
        if (!batch.ok()) return arrow_error(batch.status(), name);
        MMFEED_RETURN_IF_ERROR(write_batch(**batch));
      }
      return ok_status();
    }
    auto reader = arrow::ipc::RecordBatchStreamReader::Open(mapped, options);
    if (!reader.ok()) {
      return Error(ErrorCode::kCorruptData,
                   "not an Arrow IPC file (stream or file format): " + reader.status().message(), name);
    }
    while (true) {
      std::shared_ptr<arrow::RecordBatch> batch;
      if (auto st = (*reader)->ReadNext(&batch); !st.ok()) return arrow_error(st, name);
      if (!batch) return ok_status();
      MMFEED_RETURN_IF_ERROR(write_batch(*batch));
    }
  }

 private:
  Status write_batch(const arrow::RecordBatch& batch) {
    const std::string where = name_ + " (rows from " + std::to_string(file_row_) + ")";
    // Offsets and lengths are checked against their buffers before any value is read.
    if (auto st = batch.ValidateFull(); !st.ok()) return arrow_error(st, where);
    std::vector<ImageColumn> kinds;
    for (int c = 0; c < batch.num_columns(); ++c) kinds.push_back(image_column(*batch.column(c)->type()));
    for (std::int64_t r = 0; r < batch.num_rows(); ++r, ++file_row_) {
      MMFEED_RETURN_IF_ERROR(write_row(batch, kinds, r));
    }
    return ok_status();
  }

  Status write_row(const arrow::RecordBatch& batch, const std::vector<ImageColumn>& kinds, std::int64_t r) {
    std::string& out = m_.text;
    const std::string where = name_ + "[" + std::to_string(file_row_) + "]";
    const std::size_t start = out.size();
    const std::size_t row_limit = start + static_cast<std::size_t>(std::max<std::int64_t>(0, pool_.left()));
    ShardSample sample{std::to_string(file_row_), file_, 0, m_.members.size(), std::nullopt};
    out += '{';
    for (int c = 0; c < batch.num_columns(); ++c) {
      const arrow::Array& a = *batch.column(c);
      const std::string& column = batch.schema()->field(c)->name();
      if (c > 0) out += ',';
      append_json_string(out, column);
      out += ':';
      if (kinds[c] == ImageColumn::kNone) {
        bool within = true;
        if (auto text = is_conversation_column(column) ? json_text_of(a, r) : std::nullopt) {
          within = text->size() <= row_limit - std::min(row_limit, out.size());
          if (within) out += *text;
        } else {
          within = append_json_value(out, a, r, row_limit);
        }
        if (!within) return too_large(where);
        continue;
      }
      const auto [structs, begin, count] = row_images(a, kinds[c], r);
      const std::shared_ptr<arrow::Array> bytes = structs->GetFieldByName("bytes");
      const std::shared_ptr<arrow::Array> path = structs->GetFieldByName("path");
      if (kinds[c] == ImageColumn::kList) out += '[';
      if (count == 0 && kinds[c] == ImageColumn::kOne) out += "null";
      for (std::int64_t e = 0; e < count; ++e) {
        if (e > 0) out += ',';
        const std::int64_t i = begin + e;
        if (structs->IsNull(i) || bytes->IsNull(i)) {  // a path only, or nothing
          if (structs->IsNull(i) || path->IsNull(i)) {
            out += "null";
          } else if (!append_json_value(out, *path, i, row_limit)) {
            return too_large(where);
          }
          continue;
        }
        std::string_view value = bytes->type_id() == arrow::Type::LARGE_BINARY
                                     ? static_cast<const arrow::LargeBinaryArray&>(*bytes).GetView(i)
                                     : static_cast<const arrow::BinaryArray&>(*bytes).GetView(i);
        const auto* first = reinterpret_cast<const std::uint8_t*>(value.data());
        if (first < map_begin_ || first + value.size() > map_end_) {
          return Error(ErrorCode::kUnsupported,
                       "its record batches are compressed: the images are not bytes of the file (save it "
                       "uncompressed, as save_to_disk does, or as Parquet)",
                       where);
        }
        const std::string ref = kinds[c] == ImageColumn::kList ? column + "[" + std::to_string(e) + "]" : column;
        append_json_string(out, ref);
        m_.members.push_back({ref, static_cast<std::uint64_t>(first - map_begin_), value.size()});
        ++sample.member_count;
      }
      if (kinds[c] == ImageColumn::kList) out += ']';
    }
    return rows().end_row(out, start, row_limit, std::move(sample), where);
  }

  JsonRows rows() const { return {m_, limit_, pool_, manifest_, lines_}; }
  Error too_large(const std::string& where) const { return rows().too_large(where); }

  Manifest& m_;
  const std::size_t limit_;
  LimitedPool& pool_;
  const std::uint32_t manifest_;
  std::vector<ManifestLine>& lines_;
  const std::uint8_t* map_begin_ = nullptr;
  const std::uint8_t* map_end_ = nullptr;
  std::string name_;
  std::uint32_t file_ = 0;
  std::uint64_t file_row_ = 0;
};

}  // namespace

Result<Manifest> read_arrow_files(const std::string& source, const std::vector<std::string>& files, std::size_t limit,
                                  std::uint32_t manifest, std::vector<ManifestLine>& lines) {
  Manifest m;
  m.name = storage::redact_uri(source);
  LimitedPool pool(static_cast<std::int64_t>(std::min<std::uint64_t>(limit, INT64_MAX)));
  ArrowFileReader reader(m, limit, pool, manifest, lines);
  for (std::size_t k = 0; k < files.size(); ++k) {
    MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(files[k]));
    const std::string name = storage::redact_uri(files[k]);
    if (uri.scheme != storage::Scheme::kFile) {
      return Error(ErrorCode::kUnsupported,
                   "Arrow files are read from a local disk (copy them, or write Parquet with to_parquet)", name);
    }
    Status st = ok_status();
    try {
      st = reader.read(static_cast<std::uint32_t>(k), uri.path, name);
    } catch (const std::exception& e) {  // an allocation Arrow could not make
      st = Error(ErrorCode::kResourceExhausted, std::string("cannot read it: ") + e.what(), name);
    }
    if (!st.ok() && pool.refused() > 0) {
      return Error(ErrorCode::kResourceExhausted,
                   "reading it takes more than max_manifest_bytes (" + std::to_string(limit) + ")", name);
    }
    MMFEED_RETURN_IF_ERROR(st);
    m.shards.push_back(Shard{std::move(uri), name});
  }
  uLong crc = crc32_z(0, reinterpret_cast<const Bytef*>(m.text.data()), m.text.size());
  for (const ShardMember& member : m.members) {
    const std::uint64_t place[2] = {member.offset, member.size};
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(place), sizeof place);
  }
  m.crc32 = static_cast<std::uint32_t>(crc);
  return m;
}

}  // namespace mmfeed::dataset
