// The journal of an index being built (`<index>.journal` beside it): the samples described so far,
// a chunk at a time, so that `mmfeed index` stopped part-way (killed, preempted, out of time)
// resumes where its last whole chunk ended instead of from the start. Its header binds it to what
// it describes: the source (size, version, CRC-32 of its text) and the options whose facts its
// records hold (media read or not, media_root, the tokenizer's key, the chunk size); a journal of
// anything else is started anew. A chunk is appended whole with its CRC-32: one cut short by the
// stop, or damaged, is dropped with everything after it. Removed once the index is in place.
//
// Layout (little-endian): the key's bytes (magic "mmfeedIJ" first) and their CRC-32 (u32); then
// chunks: its bytes (u32, what follows up to the CRC), its first sample (u64), its samples (u32),
// its media entries (u64), its unreadable media (u64), its media not probed (u64), the names of
// the unreadable ones it keeps (u32, then each a u32 length and its bytes), its records and media
// entries as the index holds them, the CRC-32 of all the chunk's bytes before it (u32).
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(IndexJournal j, IndexJournal::open(path + ".journal", key, index, counts));
//   for (std::uint64_t first = j.resumed(); first < n; first += chunk) {
//     ... describe samples [first, end) into index ...
//     MMFEED_RETURN_IF_ERROR(j.append(index, first, end, media_before, chunk_counts));
//   }
//   j.remove();
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "mmfeed/error.h"
#include "mmfeed/index.h"

namespace mmfeed::dataset {

// What a chunk learned beside its records: media that could not be read (counted, the first
// named) and media not probed.
struct ChunkCounts {
  std::uint64_t unreadable = 0, not_probed = 0;
  std::vector<std::string> named;
};

// A chunk read back, not yet taken.
struct Chunk {
  std::uint64_t first = 0;
  std::vector<IndexRecord> records;
  std::vector<MediaFacts> media;
  ChunkCounts counts;
};

// A chunk's bytes as the journal holds them (after its length, before its CRC): samples
// [first, end) of `index`, their media entries (from `first_media` to the last) and `counts`.
std::string chunk_bytes(const DatasetIndex& index, std::uint64_t first, std::uint64_t end, std::uint64_t first_media,
                        const ChunkCounts& counts);

// The chunk whose bytes are `in[0, size)`, checked to start at sample `samples`, its records'
// media entries to follow on from `media`, and to fit `capacity` samples; nullopt where it does
// not (nothing is held before its counts are checked against `size`).
std::optional<Chunk> read_chunk(const std::byte* in, std::size_t size, std::uint64_t samples, std::uint64_t media,
                                std::uint64_t capacity);

class IndexJournal {
 public:
  // The journal at `path` for `key` (the bytes that bind it): the chunks of one with that key are
  // read into `index` (its records, which must be sized for every sample, and its media) and
  // `counts`; any other file there is replaced by a new journal.
  static Result<IndexJournal> open(const std::string& path, const std::string& key, DatasetIndex& index,
                                   ChunkCounts& counts);

  // Samples resumed from the journal (their records and media are in place).
  std::uint64_t resumed() const { return resumed_; }

  // Appends samples [first, end) of `index` (their media from `first_media` on) and `counts`,
  // flushed before it returns.
  Status append(const DatasetIndex& index, std::uint64_t first, std::uint64_t end, std::uint64_t first_media,
                const ChunkCounts& counts);

  // The journal deleted (the index it built is in place).
  void remove();

 private:
  IndexJournal(std::string path, std::uint64_t resumed) : path_(std::move(path)), resumed_(resumed) {}

  std::string path_;
  std::uint64_t resumed_ = 0;
  std::ofstream out_;
};

}  // namespace mmfeed::dataset
