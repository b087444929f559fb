#include "dataset/manifest.h"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <span>

#include "core/buffer_pool.h"
#include "storage/fetcher.h"
#include "storage/redact.h"
#include "text/chat.h"

namespace mmfeed::dataset {

namespace {

// The manifest (`grows`: "is larger than", "decompresses to more than") passes `limit`: refused
// before the memory is committed.
Error manifest_too_large(const std::string& where, std::size_t limit, const char* grows = "decompresses to more than") {
  return Error(ErrorCode::kResourceExhausted,
               std::string("manifest ") + grows + " max_manifest_bytes (" + std::to_string(limit) +
                   " bytes); split it, or raise the limit",
               where);
}

// Inflates gzip data (any number of members) up to `limit` bytes. zlib counts input in 32-bit
// units: the input is fed in pieces so that one over 4 GiB is read whole.
Result<std::string> gunzip(std::span<const std::byte> in, std::size_t limit, const std::string& where) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Error(ErrorCode::kInternal, "zlib init failed", where);
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  std::string out;
  std::size_t fed = 0;  // input bytes handed to zlib so far
  auto feed = [&] {
    if (z.avail_in > 0 || fed == in.size()) return;
    const std::size_t piece = std::min(kPiece, in.size() - fed);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data() + fed));
    z.avail_in = static_cast<uInt>(piece);
    fed += piece;
  };
  auto left = [&] { return z.avail_in > 0 || fed < in.size(); };
  char chunk[1 << 16];
  int rc = Z_OK;
  feed();
  while (rc != Z_STREAM_END || left()) {
    if (rc == Z_STREAM_END) inflateReset(&z);  // a concatenated member
    feed();
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&z);
      return Error(ErrorCode::kCorruptData, std::string("gzip data is corrupt: ") + (z.msg ? z.msg : "inflate failed"), where);
    }
    const std::size_t produced = sizeof chunk - z.avail_out;
    if (out.size() + produced > limit) {
      inflateEnd(&z);
      return manifest_too_large(where, limit);
    }
    out.append(chunk, produced);
    if (rc != Z_STREAM_END && !left() && z.avail_out != 0) {
      inflateEnd(&z);
      return Error(ErrorCode::kCorruptData, "gzip data is truncated", where);
    }
  }
  inflateEnd(&z);
  return out;
}

// Decompresses Zstandard data (any number of frames) up to `limit` bytes.
Result<std::string> unzstd(std::span<const std::byte> in, std::size_t limit, const std::string& where) {
  std::unique_ptr<ZSTD_DStream, decltype(&ZSTD_freeDStream)> stream(ZSTD_createDStream(), &ZSTD_freeDStream);
  if (!stream) return Error(ErrorCode::kInternal, "zstd init failed", where);
  std::string out;
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  std::string chunk(ZSTD_DStreamOutSize(), '\0');
  std::size_t hint = 1;  // 0 once a frame is complete and flushed
  for (;;) {
    ZSTD_outBuffer output{chunk.data(), chunk.size(), 0};
    const std::size_t consumed = input.pos;
    const std::size_t r = ZSTD_decompressStream(stream.get(), &output, &input);
    if (ZSTD_isError(r)) {
      return Error(ErrorCode::kCorruptData, std::string("zstd data is corrupt: ") + ZSTD_getErrorName(r), where);
    }
    if (output.pos == 0 && input.pos == consumed) break;  // nothing left buffered
    hint = r;
    if (out.size() + output.pos > limit) return manifest_too_large(where, limit);
    out.append(chunk.data(), output.pos);
    if (input.pos == input.size && output.pos < output.size) break;
  }
  if (hint != 0) return Error(ErrorCode::kCorruptData, "zstd data is truncated", where);
  return out;
}

}  // namespace

// Reads manifests from files, S3 or HTTP(S), gzip- or zstd-compressed or plain (by their magic
// bytes), each at most max_manifest_bytes fetched and decompressed, and indexes their lines.
// Relative image references resolve against the manifest's directory (or URI prefix).
Result<Manifests> read_manifests(const std::vector<std::string>& paths, std::size_t limit, const storage::S3Options& s3) {
  Manifests out;
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = limit;
  storage::Fetcher fetcher(options, s3);
  for (const std::string& path : paths) {
    MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(path));
    Manifest m;
    m.name = storage::redact_uri(path);
    if (!fetcher.submit({uri, 0, std::nullopt})) return Error(ErrorCode::kInternal, "fetcher closed", m.name);
    auto r = fetcher.next();
    if (!r) return Error(ErrorCode::kInternal, "fetcher closed", m.name);
    if (!r->data.ok()) {
      // The fetcher enforces the limit as its object size limit, and its refusal names that
      // option (max_object_bytes, the media's); for a manifest the limit is max_manifest_bytes.
      const Error& e = r->data.error();
      if (e.code() == ErrorCode::kResourceExhausted && e.message().find("max_object_bytes") != std::string::npos) {
        return manifest_too_large(m.name, limit, "is larger than");
      }
      return std::move(r->data).error().with_context("manifest");
    }
    core::Buffer data = std::move(r->data).value();
    if (data.size() >= 2 && data.data()[0] == std::byte{0x1f} && data.data()[1] == std::byte{0x8b}) {
      MMFEED_ASSIGN_OR_RETURN(m.text, gunzip(data.span(), limit, m.name));
    } else if (data.size() >= 4 && data.data()[0] == std::byte{0x28} && data.data()[1] == std::byte{0xb5} &&
               data.data()[2] == std::byte{0x2f} && data.data()[3] == std::byte{0xfd}) {
      MMFEED_ASSIGN_OR_RETURN(m.text, unzstd(data.span(), limit, m.name));
    } else {
      m.text.assign(reinterpret_cast<const char*>(data.data()), data.size());
    }
    data.reset();
    if (m.text.starts_with("\xEF\xBB\xBF")) m.text.erase(0, 3);  // a UTF-8 byte-order mark some editors add
    m.crc32 = static_cast<std::uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(m.text.data()), m.text.size()));
    if (uri.scheme == storage::Scheme::kFile) {
      m.base_dir = std::filesystem::path(uri.path).parent_path().string();
    } else {
      // The URI's own spelling (to_string redacts), without its query: "https://h/d/m.jsonl?X-Amz-..." -> "https://h/d".
      const std::string full = uri.scheme == storage::Scheme::kS3 ? "s3://" + uri.bucket + "/" + uri.key
                                                                  : uri.url.substr(0, uri.url.find_first_of("?#"));
      m.base_dir = full.substr(0, full.rfind('/'));
    }
    const auto index = static_cast<std::uint32_t>(out.files.size());
    const std::string_view text = m.text;
    std::uint64_t number = 0;
    std::size_t at = 0;
    while (at < text.size()) {
      std::size_t end = text.find('\n', at);
      if (end == std::string_view::npos) end = text.size();
      ++number;
      const std::string_view line = text.substr(at, end - at);
      if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
        if (line.size() > UINT32_MAX) {
          return Error(ErrorCode::kResourceExhausted, "line of " + std::to_string(line.size()) + " bytes",
                       m.name + ":" + std::to_string(number));
        }
        out.lines.push_back({at, static_cast<std::uint32_t>(line.size()), index, number});
      }
      at = end + 1;
    }
    out.files.push_back(std::move(m));
  }
  if (out.lines.empty()) return Error(ErrorCode::kInvalidArgument, "the manifests hold no samples");
  return out;
}


Result<std::vector<MediaRef>> media_of(const Manifests& manifests, bool allow_local_from_remote) {
  std::vector<MediaRef> out;
  for (const ManifestLine& line : manifests.lines) {
    const std::string where = manifests.where(line);
    auto c = text::parse_conversation(manifests.text(line));
    if (!c.ok()) return std::move(c).error().with_context(where);
    const std::string id = c->id.empty() ? where : c->id;
    for (auto type : {text::ContentItem::Type::kImage, text::ContentItem::Type::kVideo}) {
      for (const std::string& ref : c->media(type)) {
        auto uri = resolve(ref, manifests.files[line.manifest].base_dir, allow_local_from_remote);
        if (!uri.ok()) return std::move(uri).error().with_context(where + " (sample " + id + ")");
        out.push_back({std::move(uri).value(), id});
      }
    }
  }
  return out;
}

Result<storage::ObjectUri> resolve(std::string_view ref, const std::string& base_dir, bool allow_local_from_remote) {
  // Relative references in a remote manifest resolve against its URI prefix.
  const bool remote_base = base_dir.find("://") != std::string::npos;
  const bool relative = ref.find("://") == std::string_view::npos && !ref.empty() && ref[0] != '/';
  MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, remote_base && relative
                                                      ? storage::parse_uri(base_dir + "/" + std::string(ref))
                                                      : storage::parse_uri(ref, base_dir));
  if (remote_base && uri.scheme == storage::Scheme::kFile && !allow_local_from_remote) {
    return Error(ErrorCode::kPermissionDenied,
                 "the local file " + uri.path +
                     " is named by a remote manifest: refused (a manifest fetched from http(s):// or s3:// may name "
                     "only remote media; allow_local_media_from_remote_manifest, "
                     "--allow-local-media-from-remote-manifest, allows it)");
  }
  return uri;
}

}  // namespace mmfeed::dataset
