// A Parquet file's index (parquet_index.h): written from the file as read_parquet reads it, each
// image's value found in its fetched page; read back into the rows read_parquet would give.
#include "dataset/parquet_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "core/mapped_file.h"
#include "dataset/index_cache.h"
#include "dataset/le_bytes.h"
#include "dataset/parquet.h"
#include "storage/fetcher.h"
#include "storage/redact.h"
#include "storage/uri.h"
#include "vision/decode.h"

namespace mmfeed::dataset {

namespace {

constexpr std::array<char, 8> kMagic{'m', 'm', 'f', 'e', 'e', 'd', 'P', 'Q'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 72;
constexpr std::size_t kRowBytes = 16;
constexpr std::size_t kImageBytes = 48;
// Pages fetched at once while indexing (each at most max_object_bytes; datasets writes ~1 MB).
constexpr std::size_t kPagesInFlight = 16;
constexpr std::uint64_t kMaxPageBytes = std::uint64_t{512} << 20;  // the Loader's max_object_bytes default

// An image's place and size, as the index keeps it.
struct ImageEntry {
  storage::ByteRange value;
  std::uint32_t width = 0, height = 0;
};

// The width and height of the image whose bytes are `bytes`: 0, 0 where its header does not read.
std::pair<std::uint32_t, std::uint32_t> image_size(std::span<const std::byte> bytes) {
  auto info = vision::probe({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()});
  if (!info.ok()) return {0, 0};
  return {static_cast<std::uint32_t>(info->upright_width()), static_cast<std::uint32_t>(info->upright_height())};
}

// Each member of `m` (the file read alone) placed: its page fetched once (many at once, a remote
// one If-Match `etag`), its value found in it and its header read.
Result<std::vector<ImageEntry>> place_images(const Manifest& m, const std::string& name, const std::string& etag,
                                             const storage::S3Options& s3) {
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::size_t>> pages;  // members by page
  for (std::size_t k = 0; k < m.members.size(); ++k) pages[{m.members[k].offset, m.members[k].size}].push_back(k);
  std::vector<ImageEntry> out(m.members.size());
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = kMaxPageBytes;
  options.max_inflight = kPagesInFlight;
  storage::Fetcher fetcher(options, s3);
  std::vector<const std::vector<std::size_t>*> by_tag;
  auto next = pages.begin();
  std::size_t in_flight = 0;
  const auto submit = [&]() -> Status {
    const auto& [range, members] = *next++;
    by_tag.push_back(&members);
    storage::FetchRequest request{m.shards.front().uri, by_tag.size() - 1,
                                  storage::ByteRange{range.first, range.second}, etag};
    if (!fetcher.submit(std::move(request))) return Error(ErrorCode::kInternal, "the fetcher closed", name);
    ++in_flight;
    return ok_status();
  };
  while (next != pages.end() && in_flight < kPagesInFlight) MMFEED_RETURN_IF_ERROR(submit());
  while (in_flight > 0) {
    std::optional<storage::FetchResult> r = fetcher.next();
    if (!r) return Error(ErrorCode::kInternal, "the fetcher closed", name);
    --in_flight;
    if (!r->data.ok()) return std::move(r->data).error().with_context(name);
    const std::span<const std::byte> page = r->data->span();
    for (const std::size_t k : *by_tag[r->tag]) {
      const CellPlace& c = m.cells[k];
      const ParquetCell cell{m.chunks[c.chunk], c.first_row, c.row, c.element};
      const std::string where = name + "[" + std::to_string(c.row) + "] " + m.members[k].suffix;
      auto place = parquet_value_place(cell, page, kMaxPageBytes);
      if (!place.ok()) return std::move(place).error().with_context(where);
      if (!*place) {
        return Error(ErrorCode::kUnsupported,
                     "its images lie in compressed or dictionary-encoded pages, where no image has a byte range of "
                     "its own: no index (the Loader reads its pages as before; write the image column "
                     "uncompressed and PLAIN, as Hugging Face datasets does, to index it)",
                     where);
      }
      const auto [w, h] = image_size(page.subspan((*place)->offset, (*place)->length));
      out[k] = {{m.members[k].offset + (*place)->offset, (*place)->length}, w, h};
    }
    while (next != pages.end() && in_flight < kPagesInFlight) MMFEED_RETURN_IF_ERROR(submit());
  }
  return out;
}

std::string encode(const Manifest& m, const std::vector<ManifestLine>& lines, const std::vector<ImageEntry>& images,
                   const SourceStamp& stamp) {
  std::string names;
  std::map<std::string, std::uint32_t> named;  // each name once
  std::string body;
  for (const ManifestLine& line : lines) {
    put_le(body, line.offset, 8);
    put_le(body, line.length, 4);
    put_le(body, m.samples[line.number].member_count, 4);
  }
  for (std::size_t k = 0; k < m.members.size(); ++k) {
    const std::string& name = m.members[k].suffix;
    auto [at, added] = named.try_emplace(name, static_cast<std::uint32_t>(names.size()));
    if (added) names += name;
    put_le(body, m.members[k].offset, 8);
    put_le(body, m.members[k].size, 8);
    put_le(body, images[k].value.offset, 8);
    put_le(body, images[k].value.length, 8);
    put_le(body, images[k].width, 4);
    put_le(body, images[k].height, 4);
    put_le(body, at->second, 4);
    put_le(body, name.size(), 4);
  }
  body += m.text;
  body += names;
  std::string out(kMagic.data(), kMagic.size());
  put_le(out, kVersion, 4);
  put_le(out, 0, 4);
  put_le(out, lines.size(), 8);
  put_le(out, m.members.size(), 8);
  put_le(out, m.text.size(), 8);
  put_le(out, names.size(), 8);
  put_le(out, stamp.size, 8);
  put_le(out, static_cast<std::uint64_t>(stamp.mtime_ns), 8);
  put_le(out, stamp.etag_crc, 4);
  put_le(out, crc32_of(body.data(), body.size()), 4);
  return out + body;
}

}  // namespace

Result<ParquetIndexBuilt> write_parquet_index(const std::string& file, const std::string& out,
                                              const storage::S3Options& s3) {
  const std::string name = storage::redact_uri(file);
  MMFEED_ASSIGN_OR_RETURN(const SourceStamp before, stamp_source(file, s3));
  std::vector<ManifestLine> lines;
  MMFEED_ASSIGN_OR_RETURN(const Manifest m,
                          read_parquet(file, {file}, kDefaultMaxManifestBytes, s3, 0, lines, /*use_indexes=*/false));
  MMFEED_ASSIGN_OR_RETURN(const std::vector<ImageEntry> images, place_images(m, name, before.etag, s3));
  MMFEED_ASSIGN_OR_RETURN(const SourceStamp after, stamp_source(file, s3));
  if (after.size != before.size || after.mtime_ns != before.mtime_ns || after.etag_crc != before.etag_crc) {
    return Error(ErrorCode::kUnavailable, "it changed while it was indexed; index it again", name);
  }
  const std::string bytes = encode(m, lines, images, before);
  MMFEED_RETURN_IF_ERROR(core::write_file_whole(out, {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}));
  ParquetIndexBuilt built{lines.size(), images.size(), bytes.size(), 0};
  built.unreadable = static_cast<std::uint64_t>(
      std::count_if(images.begin(), images.end(), [](const ImageEntry& e) { return e.width == 0; }));
  return built;
}

Status read_parquet_index(std::span<const std::byte> bytes, const std::string& where, const SourceStamp& now,
                          std::size_t limit, std::uint32_t manifest, Manifest& rows, std::vector<ManifestLine>& lines,
                          ParquetIndexText* text_place) {
  const auto refuse = [&](const std::string& why, ErrorCode code = ErrorCode::kCorruptData) {
    return Error(code, why, where);
  };
  const std::byte* at = bytes.data();
  if (bytes.size() < kHeaderBytes || std::memcmp(at, kMagic.data(), kMagic.size()) != 0) {
    return refuse("not the index of a Parquet file (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (const std::uint64_t v = get_le(at + 8, 4); v != kVersion) {
    return refuse("Parquet index version " + std::to_string(v) + ", this mmfeed reads version " +
                      std::to_string(kVersion) + "; build it again (mmfeed index)",
                  ErrorCode::kUnsupported);
  }
  const std::uint64_t count = get_le(at + 16, 8), images = get_le(at + 24, 8);
  const std::uint64_t text = get_le(at + 32, 8), names = get_le(at + 40, 8);
  // Each count against what the file holds, before anything is read or held.
  const std::uint64_t room = bytes.size() - kHeaderBytes;
  const bool fits = count <= room / kRowBytes && images <= (room - count * kRowBytes) / kImageBytes &&
                    text <= room - count * kRowBytes - images * kImageBytes &&
                    names == room - count * kRowBytes - images * kImageBytes - text;
  if (!fits) {
    return refuse("truncated or extended: " + std::to_string(bytes.size()) + " bytes for " + std::to_string(count) +
                  " rows and " + std::to_string(images) + " images");
  }
  if (text_place == nullptr && text > limit) {
    return refuse("its rows' text is " + std::to_string(text) + " bytes, more than max_manifest_bytes (" +
                      std::to_string(limit) + ")",
                  ErrorCode::kResourceExhausted);
  }
  const std::uint64_t size = get_le(at + 48, 8);
  const auto mtime = static_cast<std::int64_t>(get_le(at + 56, 8));
  const auto etag_crc = static_cast<std::uint32_t>(get_le(at + 64, 4));
  if (size != now.size || mtime != now.mtime_ns || etag_crc != now.etag_crc) {
    return refuse("stale: its Parquet file changed since it was indexed (" + std::to_string(size) + " bytes then, " +
                      std::to_string(now.size) + " now" +
                      (size == now.size ? (etag_crc != now.etag_crc ? ", another ETag" : ", modified since") : "") +
                      "); build it again (mmfeed index) or delete it",
                  ErrorCode::kInvalidArgument);
  }
  if (get_le(at + 68, 4) != crc32_of(at + kHeaderBytes, room)) return refuse("it is damaged (CRC-32)");
  const std::byte* row_at = at + kHeaderBytes;
  const std::byte* image_at = row_at + count * kRowBytes;
  const std::byte* text_at = image_at + images * kImageBytes;
  const std::byte* names_at = text_at + text;
  if (text_place != nullptr) {
    *text_place = {static_cast<std::uint64_t>(text_at - at), text};
  } else {
    rows.text.assign(reinterpret_cast<const char*>(text_at), text);
  }
  rows.samples.reserve(count);
  rows.members.reserve(images);
  rows.cells.reserve(images);
  std::uint64_t image = 0;
  for (std::uint64_t r = 0; r < count; ++r, row_at += kRowBytes) {
    const std::uint64_t offset = get_le(row_at, 8), length = get_le(row_at + 8, 4), own = get_le(row_at + 12, 4);
    if (offset > text || length > text - offset || own > images - image) {
      return refuse("row " + std::to_string(r) + " lies outside its text or images");
    }
    lines.push_back({offset, static_cast<std::uint32_t>(length), manifest, r});
    rows.samples.push_back(ShardSample{std::to_string(r), 0, static_cast<std::uint32_t>(own), image, std::nullopt});
    for (const std::uint64_t end = image + own; image < end; ++image, image_at += kImageBytes) {
      const std::uint64_t name_at = get_le(image_at + 40, 4), name_length = get_le(image_at + 44, 4);
      const storage::ByteRange value{get_le(image_at + 16, 8), get_le(image_at + 24, 8)};
      if (name_at > names || name_length > names - name_at || value.offset > size ||
          value.length > size - value.offset) {
        return refuse("image " + std::to_string(image) + " lies outside its names or its file");
      }
      rows.members.push_back({std::string(reinterpret_cast<const char*>(names_at + name_at), name_length),
                              get_le(image_at, 8), get_le(image_at + 8, 8)});
      rows.cells.push_back({0, 0, 0, r, value});
    }
  }
  if (image != images)
    return refuse("its rows name " + std::to_string(image) + " of its " + std::to_string(images) + " images");
  return ok_status();
}

namespace {

// The local index at `index` (beside the file, or in the node cache) of Parquet file `path`,
// mapped and checked; its text read in place.
Result<std::optional<IndexedRows>> read_local_index(const std::string& path, const std::string& index,
                                                    const storage::S3Options& s3, std::uint32_t manifest) {
  const std::string where = storage::redact_uri(index);
  OwnedFd file(::open(index.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.fd < 0) {
    if (errno == ENOENT) return std::optional<IndexedRows>();
    return Error(ErrorCode::kIoError, std::string("cannot open it: ") + std::strerror(errno), where);
  }
  MMFEED_ASSIGN_OR_RETURN(const core::MappedFile mapped, core::MappedFile::open(index));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0 || st.st_ino != mapped.inode() || st.st_dev != mapped.device()) {
    return Error(ErrorCode::kUnavailable, "replaced while it was read; open the source again", where);
  }
  MMFEED_ASSIGN_OR_RETURN(const SourceStamp now, stamp_source(path, s3));
  std::optional<IndexedRows> out(std::in_place);
  ParquetIndexText place;
  MMFEED_RETURN_IF_ERROR(
      read_parquet_index(mapped.bytes(), where, now, SIZE_MAX, manifest, out->rows, out->lines, &place));
  out->text_crc = crc32_of(mapped.bytes().data() + place.offset, place.size);
  out->text = std::make_shared<LocalText>(file.fd, where, place.offset, place.size);
  file.release();  // the text's now
  return out;
}

// The index beside the remote file `path` in the node cache `cache_dir`: the cache's when current,
// else fetched there from beside the file (the node's first reader, under the entry's lock).
Result<std::optional<IndexedRows>> read_cached_index(const std::string& path, const storage::ObjectUri& uri,
                                                     const std::string& cache_dir, std::size_t limit,
                                                     const storage::S3Options& s3, std::uint32_t manifest) {
  const std::string cached = cached_index_path(cache_dir, path);
  MMFEED_ASSIGN_OR_RETURN(const std::unique_ptr<OwnedFd> lock, lock_cache_entry(cached, path));
  if (auto current = read_local_index(path, cached, s3, manifest); current.ok() && *current) return current;
  MMFEED_ASSIGN_OR_RETURN(const bool fetched, fetch_index_beside(path, uri, cached, s3, limit));
  if (!fetched) return std::optional<IndexedRows>();
  auto got = read_local_index(path, cached, s3, manifest);
  if (!got.ok()) {
    std::error_code ec;
    std::filesystem::remove(cached, ec);  // never used: the next reader fetches it again
    return std::move(got).error().with_context(storage::redact_uri(index_path_of(path)) +
                                               ", fetched into the cache_dir");
  }
  return got;
}

}  // namespace

Result<std::optional<IndexedRows>> read_index_beside(const std::string& path, std::size_t limit,
                                                     const storage::S3Options& s3, std::uint32_t manifest,
                                                     const std::string& cache_dir) {
  MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(path));
  if (uri.scheme == storage::Scheme::kFile) return read_local_index(path, index_path_of(uri.path), s3, manifest);
  if (path.find_first_of("?#") != std::string::npos) return std::optional<IndexedRows>();  // a signed URL
  if (!cache_dir.empty()) return read_cached_index(path, uri, cache_dir, limit, s3, manifest);
  MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri index, storage::parse_uri(index_path_of(path)));
  storage::FetchOptions options;
  options.part_size = 0;
  // Its rows' text is held to `limit` when read; its entries (64 bytes an image) come besides.
  options.max_object_bytes = limit > SIZE_MAX / 2 ? SIZE_MAX : 2 * limit;
  storage::Fetcher fetcher(options, s3);
  if (!fetcher.submit({index, 0, std::nullopt})) {
    return Error(ErrorCode::kInternal, "the fetcher closed", storage::redact_uri(path));
  }
  std::optional<storage::FetchResult> r = fetcher.next();
  if (!r) return Error(ErrorCode::kInternal, "the fetcher closed", storage::redact_uri(path));
  if (!r->data.ok()) {
    const ErrorCode code = r->data.error().code();
    if (code == ErrorCode::kNotFound || code == ErrorCode::kPermissionDenied) return std::optional<IndexedRows>();
    return std::move(r->data).error();
  }
  MMFEED_ASSIGN_OR_RETURN(const SourceStamp now, stamp_source(path, s3));
  std::optional<IndexedRows> out(std::in_place);
  MMFEED_RETURN_IF_ERROR(read_parquet_index(r->data->span(), storage::redact_uri(index_path_of(path)), now, limit,
                                            manifest, out->rows, out->lines));
  out->text_crc = crc32_of(out->rows.text.data(), out->rows.text.size());
  return out;
}

}  // namespace mmfeed::dataset
