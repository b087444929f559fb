// The journal of an index being built (index_journal.h).
#include "dataset/index_journal.h"

#include "dataset/le_bytes.h"

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/mapped_file.h"
#include "dataset/index.h"

namespace mmfeed::dataset {

namespace {

constexpr std::size_t kFixedBytes = 8 + 4 + 8 + 8 + 8 + 4;  // a chunk's counts, before its names

}  // namespace

std::optional<Chunk> read_chunk(const std::byte* in, std::size_t size, std::uint64_t samples, std::uint64_t media,
                                std::uint64_t capacity) {
  if (size < kFixedBytes) return std::nullopt;
  Chunk c;
  c.first = get_le(in, 8);
  const std::uint64_t count = get_le(in + 8, 4), media_count = get_le(in + 12, 8);
  c.counts.unreadable = get_le(in + 20, 8);
  c.counts.not_probed = get_le(in + 28, 8);
  const std::uint64_t names = get_le(in + 36, 4);
  if (c.first != samples || count > capacity - samples) return std::nullopt;
  std::size_t at = kFixedBytes;
  for (std::uint64_t i = 0; i < names; ++i) {
    if (size - at < 4) return std::nullopt;
    const std::uint64_t length = get_le(in + at, 4);
    at += 4;
    if (length > size - at) return std::nullopt;
    c.counts.named.emplace_back(reinterpret_cast<const char*>(in + at), length);
    at += length;
  }
  if ((size - at) / kRecordBytes < count || media_count > (size - at - count * kRecordBytes) / kMediaBytes ||
      size - at != count * kRecordBytes + media_count * kMediaBytes) {
    return std::nullopt;
  }
  std::uint64_t next_media = media;
  for (std::uint64_t i = 0; i < count; ++i) {
    const IndexRecord r = get_record(in + at + i * kRecordBytes);
    if (r.first_media != next_media) return std::nullopt;
    next_media += r.media();
    c.records.push_back(r);
  }
  if (next_media != media + media_count) return std::nullopt;
  at += count * kRecordBytes;
  for (std::uint64_t j = 0; j < media_count; ++j) c.media.push_back(get_media(in + at + j * kMediaBytes));
  return c;
}

std::string chunk_bytes(const DatasetIndex& index, std::uint64_t first, std::uint64_t end, std::uint64_t first_media,
                        const ChunkCounts& counts) {
  std::string chunk;
  put_le(chunk, first, 8);
  put_le(chunk, end - first, 4);
  put_le(chunk, index.media.size() - first_media, 8);
  put_le(chunk, counts.unreadable, 8);
  put_le(chunk, counts.not_probed, 8);
  put_le(chunk, counts.named.size(), 4);
  for (const std::string& n : counts.named) {
    put_le(chunk, n.size(), 4);
    chunk += n;
  }
  for (std::uint64_t i = first; i < end; ++i) put_record(chunk, index.records[i]);
  for (std::uint64_t j = first_media; j < index.media.size(); ++j) put_media(chunk, index.media[j]);
  return chunk;
}

Result<IndexJournal> IndexJournal::open(const std::string& path, const std::string& key, DatasetIndex& index,
                                        ChunkCounts& counts) {
  std::uint64_t samples = 0, good_end = 0;
  if (auto mapped = core::MappedFile::open(path); mapped.ok()) {
    const std::byte* in = mapped->bytes().data();
    const std::size_t size = mapped->size(), head = key.size() + 4;
    if (size >= head && std::memcmp(in, key.data(), key.size()) == 0 &&
        get_le(in + key.size(), 4) == crc32_of(in, key.size())) {
      good_end = head;
      for (std::size_t at = head; size - at >= 8;) {
        const std::uint64_t length = get_le(in + at, 4);
        if (length > size - at - 8 || get_le(in + at + 4 + length, 4) != crc32_of(in + at, 4 + length)) break;
        std::optional<Chunk> c = read_chunk(in + at + 4, length, samples, index.media.size(), index.records.size());
        if (!c) break;
        std::copy(c->records.begin(), c->records.end(), index.records.begin() + static_cast<std::ptrdiff_t>(samples));
        index.media.insert(index.media.end(), c->media.begin(), c->media.end());
        samples += c->records.size();
        counts.unreadable += c->counts.unreadable;
        counts.not_probed += c->counts.not_probed;
        for (std::string& n : c->counts.named) counts.named.push_back(std::move(n));
        at += 4 + length + 4;
        good_end = at;
      }
    }
  }
  IndexJournal journal(path, samples);
  if (good_end == 0) {  // none, or another build's: a new one
    journal.out_.open(path, std::ios::binary | std::ios::trunc);
    std::string head = key;
    put_le(head, crc32_of(key.data(), key.size()), 4);
    journal.out_.write(head.data(), static_cast<std::streamsize>(head.size()));
  } else {  // what followed the last whole chunk cut away
    std::error_code ec;
    std::filesystem::resize_file(path, good_end, ec);
    if (ec) return Error(ErrorCode::kIoError, "cannot cut the journal's damaged end: " + ec.message(), path);
    journal.out_.open(path, std::ios::binary | std::ios::app);
  }
  if (!journal.out_.flush()) return Error(ErrorCode::kIoError, "cannot write the journal", path);
  return journal;
}

Status IndexJournal::append(const DatasetIndex& index, std::uint64_t first, std::uint64_t end,
                            std::uint64_t first_media, const ChunkCounts& counts) {
  const std::string body = chunk_bytes(index, first, end, first_media, counts);
  if (body.size() > UINT32_MAX) return Error(ErrorCode::kInternal, "a journal chunk past 4 GiB", path_);
  std::string chunk;
  put_le(chunk, body.size(), 4);
  chunk += body;
  put_le(chunk, crc32_of(chunk.data(), chunk.size()), 4);
  out_.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  if (!out_.flush()) return Error(ErrorCode::kIoError, "cannot write the journal", path_);
  return ok_status();
}

void IndexJournal::remove() {
  out_.close();
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace mmfeed::dataset
