// A build without Arrow (MMFEED_PARQUET=OFF): Parquet and Arrow sources are refused by name.
#include "dataset/arrow_files.h"
#include "dataset/parquet.h"

namespace mmfeed::dataset {

struct ParquetChunk {};

namespace {
Error no_parquet(const std::string& where) {
  return Error(ErrorCode::kUnsupported, "this build reads no Parquet or Arrow (built with MMFEED_PARQUET=OFF)", where);
}
}  // namespace

Result<Manifest> read_parquet(const std::string& source, const std::vector<std::string>&, std::size_t,
                              const storage::S3Options&, std::uint32_t, std::vector<ManifestLine>&, bool,
                              const std::string&) {
  return no_parquet(source);
}

Result<Manifest> read_arrow_files(const std::string& source, const std::vector<std::string>&, std::size_t,
                                  std::uint32_t, std::vector<ManifestLine>&) {
  return no_parquet(source);
}

Result<storage::ByteRange> parquet_value(const ParquetCell& cell, std::span<const std::byte>, std::uint64_t,
                                         std::vector<std::byte>&) {
  return no_parquet("row " + std::to_string(cell.row));
}

Result<std::optional<storage::ByteRange>> parquet_value_place(const ParquetCell& cell, std::span<const std::byte>,
                                                              std::uint64_t) {
  return no_parquet("row " + std::to_string(cell.row));
}

}  // namespace mmfeed::dataset
