// The dataset index (include/mmfeed/index.h): built from the manifest as the Loader reads it
// (read_manifests: the same lines, the same elements, the same CRC-32), written little-endian
// in fixed-width records, and read back checked whole before any record is trusted.
#include "mmfeed/index.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

#include "core/cpus.h"
#include "dataset/index.h"
#include "dataset/manifest.h"
#include "dataset/source_files.h"
#include "storage/uri.h"
#include "text/conversation.h"

namespace mmfeed {

namespace {

constexpr std::array<char, 8> kMagic{'m', 'm', 'f', 'e', 'e', 'd', 'I', 'X'};
constexpr std::size_t kHeaderBytes = 64;
constexpr std::size_t kRecordBytes = 32;
constexpr std::size_t kNamedBad = 100;

void put(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get(const std::string& in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

std::uint32_t crc_of(const char* data, std::size_t size) {
  return static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(data), size));
}

// A local file's path, size and modification time; remote sources are refused (for now).
struct LocalFile {
  std::string path;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
};

Result<LocalFile> local_file(const std::string& source) {
  MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(source));
  if (uri.scheme != storage::Scheme::kFile) {
    return Error(ErrorCode::kUnsupported, "only local manifests are indexed so far; copy it here first", source);
  }
  struct stat st {};
  if (::stat(uri.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Error(ErrorCode::kNotFound, "no such file", source);
  }
  return LocalFile{uri.path, static_cast<std::uint64_t>(st.st_size),
                   static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

// The first bytes of the file: compressed manifests cannot be read by byte range, and a
// byte-order mark moves the text.
Result<std::uint32_t> text_start(const LocalFile& file, const std::string& source) {
  std::ifstream in(file.path, std::ios::binary);
  std::array<unsigned char, 4> head{};
  in.read(reinterpret_cast<char*>(head.data()), head.size());
  const auto got = static_cast<std::size_t>(in.gcount());
  if ((got >= 2 && head[0] == 0x1f && head[1] == 0x8b) ||
      (got >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd)) {
    return Error(ErrorCode::kUnsupported, "a compressed manifest cannot be read by byte range; index it decompressed",
                 source);
  }
  return got >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF ? 3u : 0u;
}

std::string encode(const DatasetIndex& index, std::uint32_t start) {
  std::string records;
  records.reserve(index.records.size() * kRecordBytes);
  for (const IndexRecord& r : index.records) {
    put(records, r.offset, 8);
    put(records, r.number, 8);
    put(records, r.length, 4);
    put(records, r.images, 2);
    put(records, r.videos, 2);
    put(records, r.audio, 2);
    put(records, r.bad ? 1 : 0, 2);
    put(records, 0, 4);
  }
  std::string out(kMagic.begin(), kMagic.end());
  put(out, kIndexVersion, 4);
  put(out, kRecordBytes, 4);
  put(out, index.records.size(), 8);
  put(out, index.source_size, 8);
  put(out, static_cast<std::uint64_t>(index.source_mtime_ns), 8);
  put(out, index.source_crc32, 4);
  put(out, crc_of(records.data(), records.size()), 4);
  put(out, start, 4);
  put(out, index.array ? 1 : 0, 4);
  put(out, 0, 4);
  put(out, crc_of(out.data(), out.size()), 4);
  return out + records;
}

std::uint16_t saturated(std::size_t n) { return static_cast<std::uint16_t>(std::min<std::size_t>(n, UINT16_MAX)); }

// Sample `line`'s record: where it lies (the text starting at `start` in the file) and, its text
// parsed, what it names.
void describe(const dataset::Manifests& manifests, const dataset::ManifestLine& line, std::uint32_t start,
              std::string& buffer, IndexRecord& r) {
  r.offset = start + line.offset;
  r.number = line.number;
  r.length = line.length;
  const Result<std::string_view> text = manifests.text(line, buffer);  // the text was read whole
  auto c = text.ok() ? text::parse_conversation(*text) : Result<text::Conversation>(text.error());
  if (!c.ok()) {
    r.bad = true;
    return;
  }
  r.images = saturated(c->count(text::ContentItem::Type::kImage));
  r.videos = saturated(c->count(text::ContentItem::Type::kVideo));
  r.audio = saturated(c->count(text::ContentItem::Type::kAudio));
}

// Every sample's record, the samples parsed on the usable cores, a slice each (on this thread
// alone where the system starts no more threads).
std::vector<IndexRecord> describe_all(const dataset::Manifests& manifests, std::uint32_t start) {
  const std::size_t n = manifests.lines.size();
  std::vector<IndexRecord> records(n);
  const auto threads = static_cast<std::size_t>(std::clamp(core::usable_cpus(), 1, 64));
  const std::size_t per = (n + threads - 1) / threads;
  const auto slice = [&](std::size_t t) {
    std::string buffer;
    for (std::size_t i = t * per; i < std::min(n, (t + 1) * per); ++i) {
      describe(manifests, manifests.lines[i], start, buffer, records[i]);
    }
  };
  std::vector<std::thread> pool;
  std::size_t inline_from = threads;
  for (std::size_t t = 1; t < threads && inline_from == threads; ++t) {
    try {
      pool.emplace_back(slice, t);
    } catch (const std::system_error&) {
      inline_from = t;
    }
  }
  slice(0);
  for (std::size_t t = inline_from; t < threads; ++t) slice(t);
  for (std::thread& th : pool) th.join();
  return records;
}

}  // namespace

Result<IndexSummary> build_index(const std::string& source, const std::string& out) {
  MMFEED_ASSIGN_OR_RETURN(const LocalFile file, local_file(source));
  MMFEED_ASSIGN_OR_RETURN(const std::uint32_t start, text_start(file, source));
  MMFEED_ASSIGN_OR_RETURN(dataset::SourceFiles files, dataset::source_files(source, {}));
  if (files.layout != dataset::Layout::kManifest || files.files.size() != 1) {
    return Error(ErrorCode::kUnsupported, "index one JSONL or JSON file at a time", source);
  }
  MMFEED_ASSIGN_OR_RETURN(const dataset::Manifests manifests,
                          dataset::read_manifests({source}, dataset::kDefaultMaxManifestBytes, {},
                                                  dataset::Indexes{.use = false, .cache_dir = ""}));
  const dataset::Manifest& m = manifests.files.front();
  DatasetIndex index{file.size, file.mtime_ns, m.crc32, m.array, {}};
  IndexSummary summary;
  summary.path = out.empty() ? dataset::index_path_of(file.path) : out;
  index.records = describe_all(manifests, start);
  std::string buffer;
  for (std::size_t i = 0; i < index.records.size(); ++i) {
    const IndexRecord& r = index.records[i];
    summary.text_bytes += r.length;
    if (r.bad) {  // named with its reason, parsed again: few samples are bad
      if (summary.bad.size() < kNamedBad) {
        const dataset::ManifestLine& line = manifests.lines[i];
        MMFEED_ASSIGN_OR_RETURN(const std::string_view text, manifests.text(line, buffer));
        summary.bad.push_back(manifests.where(line) + ": " + text::parse_conversation(text).error().to_string());
      }
      ++summary.bad_count;
      continue;
    }
    summary.images += r.images;
    summary.videos += r.videos;
    summary.audio += r.audio;
  }
  summary.samples = index.records.size();
  const std::string bytes = encode(index, start);
  const std::string temporary = summary.path + ".partial";
  {
    std::ofstream o(temporary, std::ios::binary | std::ios::trunc);
    o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!o.flush()) return Error(ErrorCode::kIoError, "cannot write the index", temporary);
  }
  std::error_code ec;
  std::filesystem::rename(temporary, summary.path, ec);
  if (ec) return Error(ErrorCode::kIoError, "cannot move the index into place: " + ec.message(), summary.path);
  summary.index_bytes = bytes.size();
  return summary;
}

namespace dataset {

std::string index_path_of(const std::string& file_path) { return file_path + ".mmidx"; }

Result<IndexHeader> read_index(const std::string& path, const std::string& source,
                               const std::function<void(const IndexRecord&)>& sink) {
  const auto refuse = [&](const std::string& why, ErrorCode code = ErrorCode::kCorruptData) {
    return Error(code, why, path);
  };
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return Error(ErrorCode::kNotFound, "no index: " + ec.message(), path);
  if (size < kHeaderBytes) return refuse("not an mmfeed index (" + std::to_string(size) + " bytes)");
  std::ifstream in(path, std::ios::binary);
  std::string header(kHeaderBytes, '\0');
  in.read(header.data(), kHeaderBytes);
  if (!std::equal(kMagic.begin(), kMagic.end(), header.begin())) return refuse("not an mmfeed index");
  if (get(header, 60, 4) != crc_of(header.data(), 60)) return refuse("its header is damaged (CRC-32)");
  if (const std::uint64_t v = get(header, 8, 4); v != kIndexVersion || get(header, 12, 4) != kRecordBytes) {
    return refuse("index version " + std::to_string(v) + ", this mmfeed reads version " +
                      std::to_string(kIndexVersion) + "; build it again",
                  ErrorCode::kUnsupported);
  }
  IndexHeader h;
  h.samples = get(header, 16, 8);
  // The count the header claims is checked against the file's size before anything is read.
  if (h.samples > (size - kHeaderBytes) / kRecordBytes || size - kHeaderBytes != h.samples * kRecordBytes) {
    return refuse("truncated or extended: " + std::to_string(size) + " bytes for " + std::to_string(h.samples) +
                  " samples");
  }
  h.source_size = get(header, 24, 8);
  h.source_mtime_ns = static_cast<std::int64_t>(get(header, 32, 8));
  h.source_crc32 = static_cast<std::uint32_t>(get(header, 40, 4));
  h.text_start = static_cast<std::uint32_t>(get(header, 48, 4));
  h.array = (get(header, 52, 4) & 1) != 0;
  MMFEED_ASSIGN_OR_RETURN(const LocalFile file, local_file(source));
  if (file.size != h.source_size || file.mtime_ns != h.source_mtime_ns) {
    return refuse("stale: " + source + " changed since it was indexed (" + std::to_string(h.source_size) +
                      " bytes then, " + std::to_string(file.size) + " now" +
                      (file.size == h.source_size ? ", modified since" : "") +
                      "); build it again (mmfeed index) or delete it",
                  ErrorCode::kInvalidArgument);
  }
  // Read in pieces of kChunkRecords, each record checked and handed on, the CRC-32 kept running.
  constexpr std::uint64_t kChunkRecords = 1 << 15;
  std::string chunk;
  uLong crc = crc32_z(0, nullptr, 0);
  for (std::uint64_t first = 0; first < h.samples; first += kChunkRecords) {
    const std::uint64_t n = std::min(kChunkRecords, h.samples - first);
    chunk.resize(n * kRecordBytes);
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (static_cast<std::uint64_t>(in.gcount()) != chunk.size()) return refuse("could not be read whole");
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(chunk.data()), chunk.size());
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::size_t at = i * kRecordBytes;
      IndexRecord r;
      r.offset = get(chunk, at, 8);
      r.number = get(chunk, at + 8, 8);
      r.length = static_cast<std::uint32_t>(get(chunk, at + 16, 4));
      r.images = static_cast<std::uint16_t>(get(chunk, at + 20, 2));
      r.videos = static_cast<std::uint16_t>(get(chunk, at + 22, 2));
      r.audio = static_cast<std::uint16_t>(get(chunk, at + 24, 2));
      r.bad = (get(chunk, at + 26, 2) & 1) != 0;
      if (r.offset < h.text_start || r.offset > file.size || r.length > file.size - r.offset) {
        return refuse("record " + std::to_string(first + i) + " lies outside " + source);
      }
      sink(r);
    }
  }
  if (get(header, 44, 4) != static_cast<std::uint32_t>(crc)) return refuse("its records are damaged (CRC-32)");
  return h;
}

}  // namespace dataset

Result<DatasetIndex> open_index(const std::string& path, const std::string& source) {
  DatasetIndex index;
  MMFEED_ASSIGN_OR_RETURN(const dataset::IndexHeader h,
                          dataset::read_index(path, source, [&](const IndexRecord& r) { index.records.push_back(r); }));
  index.source_size = h.source_size;
  index.source_mtime_ns = h.source_mtime_ns;
  index.source_crc32 = h.source_crc32;
  index.array = h.array;
  return index;
}

}  // namespace mmfeed
