// A build without Arrow (MMFEED_PARQUET=OFF): Parquet sources are refused by name.
#include "dataset/parquet.h"

namespace mmfeed::dataset {

struct ParquetChunk {};

namespace {
Error no_parquet(const std::string& where) {
  return Error(ErrorCode::kUnsupported, "this build reads no Parquet (built with MMFEED_PARQUET=OFF)", where);
}
}  // namespace

bool is_parquet_source(std::string_view path) { return path.ends_with(".parquet"); }

Result<Manifest> read_parquet(const std::string& source, std::size_t, const storage::S3Options&, std::uint32_t,
                              std::vector<ManifestLine>&) {
  return no_parquet(source);
}

Result<storage::ByteRange> parquet_value(const ParquetCell& cell, std::span<const std::byte>, std::uint64_t,
                                         std::vector<std::byte>&) {
  return no_parquet("row " + std::to_string(cell.row));
}

}  // namespace mmfeed::dataset
