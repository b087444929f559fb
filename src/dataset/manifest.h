// Manifests: JSONL files (local, file://, s3://, http(s)://; plain, gzip or zstd, recognised by
// their bytes) read once into memory, each line indexed, and the media their samples name. The
// Loader and `mmfeed fetch --from-manifest` read manifests through this one reader.
//
// Every size is bounded before memory is committed: the fetched object and the decompressed text
// by `max_bytes` each (gzip input is fed to zlib in pieces, so one over 4 GiB is read whole).
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(Manifests m, read_manifests({"s3://b/train.jsonl.gz"}, kDefaultMaxManifestBytes, s3));
//   for (const ManifestLine& line : m.lines) parse(m.text(line));   // errors name m.where(line)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"
#include "storage/credentials.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

inline constexpr std::size_t kDefaultMaxManifestBytes = std::size_t{4} << 30;

// One manifest, read once: its text whole (decompressed), and where relative media resolve.
struct Manifest {
  std::string name;      // as given, credentials redacted: messages, traces and the resume state show it
  std::string base_dir;  // relative image references resolve against it (a URI prefix when remote)
  std::string text;
  std::uint32_t crc32 = 0;  // of text, for the resume state's fingerprint
};

// A non-blank line of a manifest: 24 bytes, so a manifest of millions of short lines costs
// little beyond its text.
struct ManifestLine {
  std::uint64_t offset = 0;  // into its manifest's text
  std::uint32_t length = 0;
  std::uint32_t manifest = 0;
  std::uint64_t number = 0;  // 1-based line number, for messages
};

struct Manifests {
  std::vector<Manifest> files;
  std::vector<ManifestLine> lines;

  std::string_view text(const ManifestLine& line) const {
    return std::string_view(files[line.manifest].text).substr(line.offset, line.length);
  }
  std::string where(const ManifestLine& line) const {
    return files[line.manifest].name + ":" + std::to_string(line.number);
  }
};

// Reads the manifests in order; a UTF-8 byte-order mark is skipped, blank lines are not indexed.
// An error names the manifest (fetch, decompression, the limit) or says that none holds a sample.
Result<Manifests> read_manifests(const std::vector<std::string>& paths, std::size_t max_bytes,
                                 const storage::S3Options& s3);

// A sample's media reference as a URI: absolute ones as they are, relative ones against the
// manifest's directory, or its URI prefix when the manifest is remote (`base_dir` holds "://").
// A remote manifest is written by whoever controls its origin: a reference of one that resolves
// to a local file (an absolute path, a file:// URI) is refused with kPermissionDenied unless
// `allow_local_from_remote` (LoaderConfig::allow_local_media_from_remote_manifest).
// Example:
//   resolve("/etc/passwd", "https://h/data", false).error().code()   // kPermissionDenied
//   resolve("img/a.jpg", "https://h/data", false)->url                // "https://h/data/img/a.jpg"
Result<storage::ObjectUri> resolve(std::string_view ref, const std::string& base_dir, bool allow_local_from_remote);

struct MediaRef {
  storage::ObjectUri uri;
  std::string sample_id;  // the sample's id, else its manifest:line
};

// Every image and video the samples name, in manifest order, resolved as the Loader resolves
// them (resolve(), with the same local-file policy). A line that does not parse as a
// conversation, or names a URI that does not parse or is refused, is an error naming its
// manifest:line.
Result<std::vector<MediaRef>> media_of(const Manifests& manifests, bool allow_local_from_remote);

}  // namespace mmfeed::dataset
