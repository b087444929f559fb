// Reads of the samples of remote tar shards known by their byte ranges (shard_reads.h).
#include "dataset/shard_reads.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "dataset/shards.h"

namespace mmfeed::dataset {

namespace {

constexpr std::uint64_t kAheadBytes = 16u << 20;  // windows held ahead of the reader
constexpr std::chrono::minutes kWait{10};         // for one GET's answer

}  // namespace

RemoteShardReads::RemoteShardReads(std::vector<storage::ObjectUri> shards, const storage::S3Options& s3)
    : shards_(std::move(shards)) {
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes_option = "max_manifest_bytes";
  fetcher_ = std::make_unique<storage::Fetcher>(options, s3);
}

RemoteShardReads::~RemoteShardReads() = default;

void RemoteShardReads::send(std::size_t shard, const std::shared_ptr<Slot>& slot) const {
  const std::uint64_t tag = next_tag_++;
  inflight_.emplace(tag, slot);
  ++reads_.requests;
  // false only once cancelled: its wait then ends in an error
  fetcher_->submit({shards_[shard], tag, storage::ByteRange{slot->begin, slot->size}});
}

RemoteShardReads::Entry& RemoteShardReads::ask(const Range& range) const {
  Entry& e = entries_[{range.shard, range.offset}];
  if (!e.windows.empty()) return e;
  const auto window = [&](std::uint64_t begin, std::uint64_t size) {
    auto slot = std::make_shared<Slot>();
    slot->begin = begin;
    slot->size = size;
    held_ += size;
    send(range.shard, slot);
    e.windows.push_back(std::move(slot));
  };
  if (range.length <= 2 * kShardWindow) {
    window(range.offset, range.length);
  } else {
    window(range.offset, kShardWindow);
    window(range.offset + range.length - kShardWindow, kShardWindow);
  }
  return e;
}

Status RemoteShardReads::wait(const Slot& slot) const {
  while (!slot.arrived) {
    std::optional<storage::FetchResult> r = fetcher_->next_for(kWait);
    if (!r) {
      return Error(ErrorCode::kTimeout,
                   "no answer to a read of its headers within " + std::to_string(kWait.count()) + " minutes");
    }
    const auto it = inflight_.find(r->tag);
    if (it == inflight_.end()) return Error(ErrorCode::kInternal, "an answer to no request");
    Slot& s = *it->second;
    inflight_.erase(it);
    s.arrived = true;
    if (!r->data.ok()) {
      s.bytes = std::move(r->data).error();
      continue;
    }
    reads_.bytes += r->data->size();
    if (r->data->size() != s.size) {
      s.bytes = Error(ErrorCode::kCorruptData, "the shard ends before byte " + std::to_string(s.begin + s.size) +
                                                   " (its .tar.idx does not match it: index it again)");
      continue;
    }
    s.bytes = std::string(reinterpret_cast<const char*>(r->data->data()), r->data->size());
  }
  return ok_status();
}

void RemoteShardReads::prefetch(std::span<const Range> ranges) const {
  std::lock_guard lock(mu_);
  for (const Range& range : ranges) {
    if (auto it = entries_.find({range.shard, range.offset}); it != entries_.end()) {
      ++it->second.wanted;  // asked for before (a sample drawn twice): read twice
      continue;
    }
    if (held_ + std::min(range.length, 2 * kShardWindow) > kAheadBytes) continue;  // read when asked, then
    ++ask(range).wanted;
  }
}

Result<RangeSample> RemoteShardReads::read(const Range& range, std::size_t limit) const {
  std::lock_guard lock(mu_);
  auto found = entries_.find({range.shard, range.offset});
  Entry& e = found != entries_.end() ? found->second : ask(range);
  if (found == entries_.end()) ++e.wanted;
  const std::vector<std::shared_ptr<Slot>> windows = e.windows;
  if (--e.wanted <= 0) {  // this read takes the windows; the entry goes
    for (const auto& w : windows) held_ -= w->size;
    entries_.erase({range.shard, range.offset});
  }
  // Bytes within a window arrived come from it; any other, from a GET of their own.
  const RangeReader reader = [&](std::uint64_t at, void* into, std::size_t size) -> Status {
    for (const auto& w : windows) {
      if (at < w->begin || at + size > w->begin + w->size) continue;
      MMFEED_RETURN_IF_ERROR(wait(*w));
      if (!w->bytes.ok()) return w->bytes.error();
      std::memcpy(into, w->bytes->data() + (at - w->begin), size);
      return ok_status();
    }
    auto own = std::make_shared<Slot>();
    own->begin = at;
    own->size = size;
    send(range.shard, own);
    MMFEED_RETURN_IF_ERROR(wait(*own));
    if (!own->bytes.ok()) return own->bytes.error();
    std::memcpy(into, own->bytes->data(), size);
    return ok_status();
  };
  return parse_shard_range(reader, range.offset, range.length, limit);
}

IndexedText::Reads RemoteShardReads::reads() const {
  std::lock_guard lock(mu_);
  return reads_;
}

}  // namespace mmfeed::dataset
