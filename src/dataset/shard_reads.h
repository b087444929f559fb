// Reads of the samples of remote tar shards known by their byte ranges (a .tar.idx beside each
// shard: energon prepare's, or mmfeed index's uploaded): a sample's headers and .json come from
// its range's first and last kShardWindow bytes (one GET for a range up to twice that), fetched
// ahead for the samples the reader reaches next (prefetch()); a header or .json outside them (a
// sample whose middle members are large) is read by a GET of its own. The media are not read
// here: the loader fetches them as byte ranges of their shard, as it does for scanned shards.
//
// Example:
//   RemoteShardReads reads(shard_uris, s3);
//   reads.prefetch(next_samples);                       // {shard, offset, length} each
//   MMFEED_ASSIGN_OR_RETURN(RangeSample s, reads.read({2, 1536, 104960}, max_manifest_bytes));
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dataset/indexed_text.h"
#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "storage/credentials.h"
#include "storage/fetcher.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

inline constexpr std::uint64_t kShardWindow = 16 << 10;  // bytes of a sample's range read first, from each end

class RemoteShardReads {
 public:
  // A sample: `length` bytes at `offset` of shard number `shard`.
  struct Range {
    std::size_t shard = 0;
    std::uint64_t offset = 0, length = 0;
  };

  RemoteShardReads(std::vector<storage::ObjectUri> shards, const storage::S3Options& s3);
  ~RemoteShardReads();
  RemoteShardReads(const RemoteShardReads&) = delete;
  RemoteShardReads& operator=(const RemoteShardReads&) = delete;

  // `ranges` are to be read soon: their windows' GETs sent (at most kAheadBytes held ahead).
  void prefetch(std::span<const Range> ranges) const;
  // The sample `range`: its key, members and .json (`limit`: the largest .json or extended header
  // accepted), as read_shard_range reads a local one; an error says what is wrong, naming the byte.
  Result<RangeSample> read(const Range& range, std::size_t limit) const;
  // GETs sent and the bytes they brought.
  IndexedText::Reads reads() const;

 private:
  // Bytes [begin, begin + size) of a shard, asked for: arrived or not.
  struct Slot {
    std::uint64_t begin = 0, size = 0;
    bool arrived = false;
    Result<std::string> bytes = std::string();
  };
  // A sample's windows, asked for ahead or now, and how many reads still want them.
  struct Entry {
    std::vector<std::shared_ptr<Slot>> windows;
    int wanted = 0;
  };
  using Key = std::pair<std::size_t, std::uint64_t>;  // shard, offset

  // Sends a GET of `slot`'s bytes of shard `shard`. The lock is held.
  void send(std::size_t shard, const std::shared_ptr<Slot>& slot) const;
  // The entry for `range`, its windows' GETs sent. The lock is held.
  Entry& ask(const Range& range) const;
  // Waits for `slot` to arrive (filing whatever else arrives first). The lock is held.
  Status wait(const Slot& slot) const;

  const std::vector<storage::ObjectUri> shards_;
  mutable std::mutex mu_;
  std::unique_ptr<storage::Fetcher> fetcher_;
  mutable std::map<Key, Entry> entries_;
  mutable std::map<std::uint64_t, std::shared_ptr<Slot>> inflight_;  // by fetch tag
  mutable std::uint64_t held_ = 0;                                   // bytes of the entries' windows
  mutable std::uint64_t next_tag_ = 0;
  mutable IndexedText::Reads reads_;
};

}  // namespace mmfeed::dataset
