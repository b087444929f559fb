// The dataset index as the manifest reader opens it (the format and its public face:
// include/mmfeed/index.h; built and read in index.cc): mapped, so the node's ranks hold its pages
// once, and each record decoded where it lies when asked for.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(auto index, MappedIndex::open(index_path_of(path), path));
//   for (std::uint64_t i = 0; i < index->samples(); ++i) lines.push_back(index->record(i).offset);
#pragma once

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
  bool array = false;
};

class MappedIndex {
 public:
  // The index at `path` of the local file `source`, mapped and checked whole before anything is
  // trusted: its header (magic, version, CRC-32, the sizes it claims against the file's, `source`'s
  // size and mtime), its records' and media entries' CRC-32, each record within `source` and its
  // media where the entries lie. An error names `path` and what is wrong.
  static Result<std::shared_ptr<const MappedIndex>> open(const std::string& path, const std::string& source);

  const IndexHeader& header() const { return header_; }
  std::uint64_t samples() const { return header_.samples; }
  IndexRecord record(std::uint64_t i) const;  // i < samples()
  MediaFacts media(std::uint64_t j) const;    // j < header().media
  std::size_t bytes() const { return file_.size(); }

  MappedIndex(core::MappedFile file, IndexHeader header) : file_(std::move(file)), header_(header) {}

 private:
  core::MappedFile file_;
  IndexHeader header_;
};

}  // namespace mmfeed::dataset
