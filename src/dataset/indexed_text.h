// The text of a manifest opened from its index (index.h): it stays where it lies, and each
// sample's is read by its byte range when asked for, from a local file (pread; the file held
// open, so a file replaced since still reads as indexed) or from a remote object (ranged GETs
// pinned by If-Match to the version indexed), or held (a remote Parquet file's index fetched into
// memory), several files' laid end to end (SegmentedText: a Parquet source's rows, each file's text
// in its index or read). For a remote object the samples the reader will want
// next are fetched ahead (prefetch()): adjacent ranges coalesced into one GET, a bounded number
// of bytes held.
//
// Example:
//   RemoteText text(uri, "s3://b/train.jsonl", etag, /*start=*/0, size, s3, max_line);
//   text.prefetch(next_ranges);                  // their GETs sent
//   std::string buffer;
//   auto line = text.read({offset, length}, buffer);   // waits for its GET, if any
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"
#include "storage/credentials.h"
#include "storage/fetcher.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

// A sample's text: `length` bytes at `offset` from the text's start (after a byte-order mark).
struct TextRange {
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

class IndexedText {
 public:
  IndexedText(std::string name, std::uint64_t start, std::uint64_t size)
      : name_(std::move(name)), start_(start), size_(size) {}
  virtual ~IndexedText() = default;
  IndexedText(const IndexedText&) = delete;
  IndexedText& operator=(const IndexedText&) = delete;

  // The text of `range` into `buffer`; an error naming the file where it cannot be read as
  // indexed (cut since, replaced since, unreachable).
  virtual Result<std::string_view> read(TextRange range, std::string& buffer) const = 0;
  // `ranges` are to be read soon: fetched ahead where a read costs a round trip.
  virtual void prefetch(std::span<const TextRange> ranges) const { (void)ranges; }
  virtual bool remote() const { return false; }

  // What reading the samples' text has cost: GETs sent and the bytes they brought (0 for a local file).
  struct Reads {
    std::uint64_t requests = 0, bytes = 0;
  };
  virtual Reads reads() const { return {}; }

  std::uint64_t size() const { return size_; }  // the text's, as read_manifests would hold it

 protected:
  const std::string name_;
  const std::uint64_t start_;
  const std::uint64_t size_;
};

class LocalText final : public IndexedText {
 public:
  // `fd` is owned (closed with this).
  LocalText(int fd, std::string name, std::uint64_t start, std::uint64_t size)
      : IndexedText(std::move(name), start, size), fd_(fd) {}
  ~LocalText() override;
  Result<std::string_view> read(TextRange range, std::string& buffer) const override;

 private:
  const int fd_;
};

// Text held in memory.
class MemoryText final : public IndexedText {
 public:
  MemoryText(std::string name, std::string text)
      : IndexedText(std::move(name), 0, text.size()), text_(std::move(text)) {}
  Result<std::string_view> read(TextRange range, std::string& buffer) const override;

 private:
  const std::string text_;
};

// The texts of several files laid end to end, each sample's within one of them.
class SegmentedText final : public IndexedText {
 public:
  // `texts` in order; the text's size is theirs summed.
  SegmentedText(std::string name, std::vector<std::shared_ptr<const IndexedText>> texts);
  Result<std::string_view> read(TextRange range, std::string& buffer) const override;

 private:
  static std::uint64_t total(const std::vector<std::shared_ptr<const IndexedText>>& texts);
  const std::vector<std::shared_ptr<const IndexedText>> texts_;
  std::vector<std::uint64_t> starts_;  // of each text, in the whole
};

class RemoteText final : public IndexedText {
 public:
  // The object at `uri` (shown as `name`) whose version is `etag`; `max_line`: the longest sample
  // text accepted (the Loader's max_manifest_bytes).
  RemoteText(storage::ObjectUri uri, std::string name, std::string etag, std::uint64_t start, std::uint64_t size,
             const storage::S3Options& s3, std::uint64_t max_line);
  ~RemoteText() override;
  Result<std::string_view> read(TextRange range, std::string& buffer) const override;
  void prefetch(std::span<const TextRange> ranges) const override;
  bool remote() const override { return true; }
  Reads reads() const override;

 private:
  // A sample's text, asked for (ahead or now): arrived or not, and how many reads still want it.
  struct Entry {
    std::uint32_t length = 0;
    int wanted = 0;
    bool arrived = false;
    Result<std::string> text = std::string();
  };
  // The samples one GET brings: a span of the object.
  struct Span {
    std::uint64_t begin = 0, end = 0;    // of the text
    std::vector<std::uint64_t> samples;  // their offsets (entries_' keys)
  };
  // Sends a GET of `span` (entries_ holds its samples). The lock is held.
  void send(Span span) const;
  // Waits for the next GET to end and files its samples' text. The lock is held.
  Status take_one() const;

  const storage::ObjectUri uri_;
  const std::string etag_;
  mutable std::mutex mu_;
  std::unique_ptr<storage::Fetcher> fetcher_;
  mutable std::map<std::uint64_t, Entry> entries_;  // by offset
  mutable std::map<std::uint64_t, Span> inflight_;  // by fetch tag
  mutable std::uint64_t held_ = 0;                  // bytes of the entries' text, asked or arrived
  mutable std::uint64_t next_tag_ = 0;
  mutable Reads reads_;
};

}  // namespace mmfeed::dataset
