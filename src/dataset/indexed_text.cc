#include "dataset/indexed_text.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

namespace mmfeed::dataset {

namespace {

constexpr std::uint64_t kAheadBytes = 16u << 20;  // text fetched ahead and not yet read, at most
constexpr std::uint64_t kGap = 64;                // ranges this close (a line break, blank lines between) are one GET
constexpr std::uint64_t kMaxSpan = 1u << 20;      // a coalesced GET's bytes, at most
constexpr std::chrono::minutes kWait{10};         // for a GET to end (each attempt has its own deadlines)

}  // namespace

LocalText::~LocalText() { ::close(fd_); }

Result<std::string_view> MemoryText::read(TextRange range, std::string& buffer) const {
  (void)buffer;
  if (range.offset > text_.size() || range.length > text_.size() - range.offset) {
    return Error(ErrorCode::kInternal, "a sample's range past its text", name_);
  }
  return std::string_view(text_).substr(range.offset, range.length);
}

std::uint64_t SegmentedText::total(const std::vector<std::shared_ptr<const IndexedText>>& texts) {
  std::uint64_t size = 0;
  for (const auto& t : texts) size += t->size();
  return size;
}

SegmentedText::SegmentedText(std::string name, std::vector<std::shared_ptr<const IndexedText>> texts)
    : IndexedText(std::move(name), 0, total(texts)), texts_(std::move(texts)) {
  std::uint64_t at = 0;
  for (const auto& t : texts_) {
    starts_.push_back(at);
    at += t->size();
  }
}

Result<std::string_view> SegmentedText::read(TextRange range, std::string& buffer) const {
  // The last text starting at or before the range (empty texts share their start with the next).
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), range.offset);
  if (it == starts_.begin()) return Error(ErrorCode::kInternal, "a sample's range before its text", name_);
  const auto k = static_cast<std::size_t>(it - starts_.begin() - 1);
  const std::uint64_t within = range.offset - starts_[k];
  if (within > texts_[k]->size() || range.length > texts_[k]->size() - within) {
    return Error(ErrorCode::kInternal, "a sample's range spans two files' text", name_);
  }
  return texts_[k]->read({within, range.length}, buffer);
}

Result<std::string_view> LocalText::read(TextRange range, std::string& buffer) const {
  buffer.resize(range.length);
  std::size_t got = 0;
  const std::uint64_t at = start_ + range.offset;
  while (got < range.length) {
    const ssize_t n = ::pread(fd_, buffer.data() + got, range.length - got, static_cast<off_t>(at + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(ErrorCode::kIoError, std::string("read failed: ") + std::strerror(errno), name_);
    if (n == 0) {
      return Error(ErrorCode::kCorruptData,
                   "ends at byte " + std::to_string(at + got) + ", before the sample its index places at " +
                       std::to_string(at) + " (" + std::to_string(range.length) +
                       " bytes): the file was cut since it was indexed",
                   name_);
    }
    got += static_cast<std::size_t>(n);
  }
  return std::string_view(buffer);
}

RemoteText::RemoteText(storage::ObjectUri uri, std::string name, std::string etag, std::uint64_t start,
                       std::uint64_t size, const storage::S3Options& s3, std::uint64_t max_line)
    : IndexedText(std::move(name), start, size), uri_(std::move(uri)), etag_(std::move(etag)) {
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = std::max(max_line, kMaxSpan);
  options.max_object_bytes_option = "max_manifest_bytes";
  fetcher_ = std::make_unique<storage::Fetcher>(options, s3);
}

RemoteText::~RemoteText() = default;

void RemoteText::send(Span span) const {
  const std::uint64_t tag = next_tag_++;
  storage::FetchRequest request{uri_, tag, storage::ByteRange{start_ + span.begin, span.end - span.begin}, etag_};
  inflight_.emplace(tag, std::move(span));
  ++reads_.requests;
  fetcher_->submit(std::move(request));  // false only once cancelled: its wait then ends in an error
}

Status RemoteText::take_one() const {
  std::optional<storage::FetchResult> r = fetcher_->next_for(kWait);
  if (!r) {
    return Error(ErrorCode::kTimeout,
                 "no answer to a sample's text request within " + std::to_string(kWait.count()) + " minutes", name_);
  }
  const auto it = inflight_.find(r->tag);
  if (it == inflight_.end()) return Error(ErrorCode::kInternal, "an answer to no request", name_);
  const Span span = std::move(it->second);
  inflight_.erase(it);
  std::optional<Error> failed;
  if (!r->data.ok()) {
    const Error& e = r->data.error();
    failed = r->http_status == 412
                 ? Error(ErrorCode::kUnavailable, "replaced since it was indexed (" + e.message() + ")", name_)
                 : Error(e.code(), "cannot read a sample's text: " + e.to_string(), name_);
  } else {
    reads_.bytes += r->data->size();
    if (r->data->size() != span.end - span.begin) {
      failed = Error(ErrorCode::kCorruptData,
                     std::to_string(r->data->size()) + " bytes where its index places " +
                         std::to_string(span.end - span.begin) + ": it was cut since it was indexed",
                     name_);
    }
  }
  for (const std::uint64_t offset : span.samples) {
    Entry& e = entries_.at(offset);
    e.arrived = true;
    if (failed) {
      e.text = *failed;
    } else {
      e.text = std::string(reinterpret_cast<const char*>(r->data->data()) + (offset - span.begin), e.length);
    }
  }
  return ok_status();
}

void RemoteText::prefetch(std::span<const TextRange> ranges) const {
  std::lock_guard lock(mu_);
  std::vector<TextRange> wanted;
  for (const TextRange& range : ranges) {
    if (auto it = entries_.find(range.offset); it != entries_.end()) {
      ++it->second.wanted;  // asked for before (a sample drawn twice): read twice
      continue;
    }
    if (held_ + range.length > kAheadBytes) continue;  // read when asked, then
    entries_.emplace(range.offset, Entry{range.length, 1, false, std::string()});
    held_ += range.length;
    wanted.push_back(range);
  }
  std::sort(wanted.begin(), wanted.end(), [](const TextRange& a, const TextRange& b) { return a.offset < b.offset; });
  Span span;
  for (const TextRange& range : wanted) {
    const std::uint64_t end = range.offset + range.length;
    if (!span.samples.empty() && (range.offset > span.end + kGap || end - span.begin > kMaxSpan)) {
      send(std::move(span));
      span = Span();
    }
    if (span.samples.empty()) span.begin = range.offset;
    span.end = std::max(span.end, end);
    span.samples.push_back(range.offset);
  }
  if (!span.samples.empty()) send(std::move(span));
}

Result<std::string_view> RemoteText::read(TextRange range, std::string& buffer) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(range.offset);
  if (it == entries_.end() || it->second.length != range.length) {  // not asked for ahead: asked for now
    if (it != entries_.end()) return Error(ErrorCode::kInternal, "two lengths for one sample's text", name_);
    it = entries_.emplace(range.offset, Entry{range.length, 1, false, std::string()}).first;
    held_ += range.length;
    send(Span{range.offset, range.offset + range.length, {range.offset}});
  }
  while (!it->second.arrived) MMFEED_RETURN_IF_ERROR(take_one());
  Entry& e = it->second;
  --e.wanted;
  Result<std::string_view> out = std::string_view();
  if (!e.text.ok()) {
    out = e.text.error();
  } else {
    buffer = e.wanted > 0 ? *e.text : std::move(*e.text);
    out = std::string_view(buffer);
  }
  if (e.wanted <= 0) {
    held_ -= e.length;
    entries_.erase(it);
  }
  return out;
}

IndexedText::Reads RemoteText::reads() const {
  std::lock_guard lock(mu_);
  return reads_;
}

}  // namespace mmfeed::dataset
