// The dataset index as the manifest reader opens it (the format and its public face:
// include/mmfeed/index.h; built and read in index.cc): mapped, so the node's ranks hold its pages
// once, and checked a block at a time: the header and the block table when opened, a block of
// records and its media entries the first time one of its records is asked for. A rank reads the
// blocks of the samples it trains on, not the whole index.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(auto index, MappedIndex::open(index_path_of(path), path));
//   MMFEED_ASSIGN_OR_RETURN(IndexRecord r, index->record(7));   // its block checked first
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/mapped_file.h"
#include "mmfeed/error.h"
#include "mmfeed/index.h"

namespace mmfeed::dataset {

// Where a local manifest's index is looked for: beside it, "<file>.mmidx".
std::string index_path_of(const std::string& file_path);

struct IndexHeader {
  std::uint64_t samples = 0;
  std::uint64_t media = 0;  // media entries
  std::uint64_t source_size = 0;
  std::int64_t source_mtime_ns = 0;
  std::uint32_t source_crc32 = 0;
  std::uint32_t text_start = 0;  // 3 after a UTF-8 byte-order mark
  std::uint32_t tokens_key = 0;  // text_tokens_key() of what counted the text tokens; 0: not counted
  bool array = false;
};

class MappedIndex {
 public:
  // The index at `path` of the local file `source`, mapped; its header (magic, version, CRC-32,
  // the sizes it claims against the file's, `source`'s size and mtime) and its block table
  // (CRC-32, where each block's media begin) checked before anything is trusted. An error names
  // `path` and what is wrong.
  static Result<std::shared_ptr<const MappedIndex>> open(const std::string& path, const std::string& source);

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
