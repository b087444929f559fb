// Manifests: JSONL files, or files holding one JSON array of samples (local, file://, s3://,
// http(s)://; plain, gzip or zstd, recognised by their bytes), read once into memory, each sample
// indexed (a line, an element), and the media their samples name. A file with a valid index
// (`mmfeed index`, index.h: beside a local one; a remote one's in the node cache) is opened from
// the index alone: its text is not read, each sample's is read by its byte range when asked for. The Loader and `mmfeed
// fetch
// --from-manifest` read manifests through this one reader.
//
// Every size is bounded before memory is committed: the fetched object and the decompressed text
// by `max_bytes` each (gzip input is fed to zlib in pieces, so one over 4 GiB is read whole).
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(Manifests m, read_manifests({"s3://b/train.jsonl.gz"}, kDefaultMaxManifestBytes, s3));
//   std::string buffer;
//   for (std::uint64_t i = 0; i < m.size(); ++i) parse(m.text(*m.line(i), buffer).value());  // errors: m.where(line)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/index.h"
#include "dataset/indexed_text.h"
#include "mmfeed/error.h"
#include "storage/credentials.h"
#include "storage/fetcher.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

inline constexpr std::size_t kDefaultMaxManifestBytes = std::size_t{4} << 30;

// A member of a tar shard (shards.h): its suffix after the sample's key and its bytes.
struct ShardMember {
  std::string suffix;        // "0.jpg" of "key.0.jpg"
  std::uint64_t offset = 0;  // of its data in the shard
  std::uint64_t size = 0;
};

// A sample of tar shards: its key, shard and members (a range of Manifest::members).
struct ShardSample {
  std::string key;
  std::uint32_t shard = 0;
  std::uint32_t member_count = 0;
  std::uint64_t first_member = 0;
  std::optional<Error> error;  // the shard's damage this sample fails by (its text is then empty)
};

// A column chunk of a Parquet file's images (parquet.h): what decoding its pages needs, in
// Arrow's types (opaque here).
struct ParquetChunk;

// Where an embedded Parquet image lies: its column chunk, the row group's row the fetched range's
// first data page starts with, the image's row, and its place in the row's list.
struct ParquetCell {
  std::shared_ptr<const ParquetChunk> chunk;
  std::uint64_t first_row = 0;
  std::uint64_t row = 0;
  std::uint32_t element = 0;
};

// A Parquet sample's member (parallel to Manifest::members): its chunk (in Manifest::chunks). Read
// from the file's index (parquet_index.h): `value`, the image's own bytes in the file, fetched
// alone (no chunk: nothing to decode).
struct CellPlace {
  std::uint32_t chunk = 0;
  std::uint32_t element = 0;
  std::uint64_t first_row = 0;
  std::uint64_t row = 0;
  std::optional<storage::ByteRange> value;
};

struct Shard {
  storage::ObjectUri uri;
  std::string name;  // as shown (redacted)
};

// A sample of a shard read from its byte range (read_shard_sample, shards.h): its key, its
// members (offsets in the shard) and its .json member's text.
struct RangeSample {
  std::string key;
  std::vector<ShardMember> members;
  std::string json;
};

class RemoteShardReads;  // shard_reads.h

// The samples of local tar shards as Energon's own index lists them (`energon prepare` writes
// "<shard>.tar.idx" beside each shard: each sample's first byte, then the end of the last): held
// 8 bytes a sample, each sample's members and .json read by its byte range when it is prepared.
struct ShardRanges {
  std::vector<std::vector<std::uint64_t>> starts;  // per shard: its samples' first bytes, then their end
  std::vector<std::uint64_t> first_sample;         // per shard: its first sample's number in the manifest
  std::shared_ptr<const RemoteShardReads> remote;  // remote shards: their samples' headers read by GETs

  std::uint64_t samples() const { return first_sample.empty() ? 0 : first_sample.back() + starts.back().size() - 1; }
  // The shard holding the manifest's sample `number` (< samples()).
  std::size_t shard_of(std::uint64_t number) const {
    return static_cast<std::size_t>(std::upper_bound(first_sample.begin(), first_sample.end(), number) -
                                    first_sample.begin() - 1);
  }
};

// One file of a source of several JSONL or JSON files (a glob, a folder): its text lies in the
// manifest's from `offset`, and its own references resolve against its own directory.
struct ManifestPart {
  std::string name;
  std::string base_dir;
  std::uint64_t offset = 0;
  bool array = false;
};

// One manifest, read once: its text whole (decompressed), and where relative media resolve.
// For tar shards (shards.h) the text is the samples' .json members, one per line, and the
// samples' media are members of their shard. For Parquet files (parquet.h) `shards` are the
// files, the text is the rows written as JSON, and a sample's members its embedded images.
struct Manifest {
  std::string name;      // as given, credentials redacted: messages, traces and the resume state show it
  std::string base_dir;  // relative image references resolve against it (a URI prefix when remote)
  std::string text;      // empty when `indexed`
  std::shared_ptr<const IndexedText> indexed;  // opened from its index: the text stays in the file
  std::shared_ptr<const MappedIndex> index;    // that index, mapped: its samples' records and media facts
  std::uint64_t first_line = 0;                // its first sample's number among all manifests' samples
  std::uint64_t line_count = 0;                // its samples
  std::uint64_t lines_from = 0;                // where its lines begin in Manifests::held (not when indexed)
  bool index_built = false;                    // this read built its index (into Indexes::cache_dir)
  std::uint32_t crc32 = 0;    // of text (and, for shards, the members' names and places): the fingerprint's
  bool array = false;         // one JSON array (its first non-blank byte is '['), not JSONL
  bool remote = false;        // fetched from s3:// or http(s)://: its origin wrote the references
  std::vector<Shard> shards;  // tar shards; empty for a JSONL or JSON array manifest
  std::vector<ShardMember> members;
  std::vector<ShardSample> samples;  // by ManifestLine::number
  bool parquet = false;              // rows of Parquet files: members are cells (below), other references paths
  std::vector<std::shared_ptr<const ParquetChunk>> chunks;
  std::vector<CellPlace> cells;       // by member
  std::vector<ManifestPart> parts;    // a source of several JSONL/JSON files, in order; empty for one
  std::optional<ShardRanges> ranges;  // shards opened from Energon's .tar.idx: `samples` and `text` empty

  std::uint64_t text_size() const { return indexed ? indexed->size() : text.size(); }

  // The file holding the text at `offset`: nullptr when the manifest is one file.
  const ManifestPart* part_at(std::uint64_t offset) const {
    if (parts.empty()) return nullptr;
    auto it = std::upper_bound(parts.begin(), parts.end(), offset,
                               [](std::uint64_t at, const ManifestPart& p) { return at < p.offset; });
    return &*(it == parts.begin() ? it : it - 1);
  }
};

// A sample of a manifest, a non-blank line or an array's element: 24 bytes, so a manifest of
// millions of short samples costs little beyond its text.
struct ManifestLine {
  std::uint64_t offset = 0;  // into its manifest's text
  std::uint32_t length = 0;
  std::uint32_t manifest = 0;
  std::uint64_t number = 0;  // for messages: the 1-based line number, or the 0-based array index
};

// The manifests' samples, numbered 0.. across them in order: a manifest opened from its index
// keeps its samples in the index (decoded when asked for), the others' lines are held.
struct Manifests {
  std::vector<Manifest> files;
  std::vector<ManifestLine> held;  // the lines of the manifests not opened from an index

  std::uint64_t size() const { return files.empty() ? 0 : files.back().first_line + files.back().line_count; }
  // The manifest holding sample `i` (< size()).
  std::uint32_t manifest_of(std::uint64_t i) const {
    auto it = std::upper_bound(files.begin(), files.end(), i,
                               [](std::uint64_t at, const Manifest& m) { return at < m.first_line; });
    return static_cast<std::uint32_t>(it - files.begin() - 1);
  }
  // Sample `i` (< size()): its held line, or its index record (an error where the index's block
  // holding it does not check out, naming the index).
  Result<ManifestLine> line(std::uint64_t i) const;
  // A sample's text: a view of the manifest's, or (opened from an index) read into `buffer`. A
  // shard sample known by its byte range (Manifest::ranges) is read whole by read_range() instead.
  Result<std::string_view> text(const ManifestLine& line, std::string& buffer) const {
    const Manifest& m = files[line.manifest];
    if (m.indexed) return m.indexed->read({line.offset, line.length}, buffer);
    if (m.ranges) return Error(ErrorCode::kInternal, "a shard sample's text is read with its range", where(line));
    return std::string_view(m.text).substr(line.offset, line.length);
  }
  // Samples `indexes` (< size()) are to be read soon: the text of those of a remote manifest opened
  // from its index is fetched ahead (indexed_text.h); the others need nothing.
  void prefetch(std::span<const std::uint64_t> indexes) const;
  // Whether prefetch() does anything (a remote manifest is opened from its index).
  bool reads_text_remotely() const {
    return std::any_of(files.begin(), files.end(), [](const Manifest& m) {
      return (m.indexed && m.indexed->remote()) || (m.ranges && m.ranges->remote);
    });
  }
  // What reading samples' text by ranged GETs has cost so far (remote manifests opened from their
  // index, remote shards from their .tar.idx): GETs and bytes.
  IndexedText::Reads remote_text_reads() const;
  // A shard sample of a manifest with `ranges`: its byte range read and its members decoded; an
  // error naming the sample and what is wrong (a header that does not decode, a range that cuts a
  // member or holds two samples, no .json member).
  Result<RangeSample> read_range(const ManifestLine& line, std::size_t limit) const;
  // "train.jsonl:12" (a line), "train.json[11]" (an element), "shard-003.tar[a1]" (a shard's
  // sample), "shard-003.tar[#17]" (its 18th, known by its range), "train.parquet[7]" (a Parquet
  // file's row).
  std::string where(const ManifestLine& line) const {
    const Manifest& m = files[line.manifest];
    if (m.ranges) {
      const std::size_t shard = m.ranges->shard_of(line.number);
      return m.shards[shard].name + "[#" + std::to_string(line.number - m.ranges->first_sample[shard]) + "]";
    }
    if (!m.shards.empty()) {
      const ShardSample& s = m.samples[line.number];
      return m.shards[s.shard].name + "[" + s.key + "]";
    }
    const ManifestPart* part = m.part_at(line.offset);
    const std::string& name = part ? part->name : m.name;
    return (part ? part->array : m.array) ? name + "[" + std::to_string(line.number) + "]"
                                          : name + ":" + std::to_string(line.number);
  }
};

// How read_manifests treats dataset indexes (index.h).
struct Indexes {
  bool use = true;  // false: read the text even where an index lies (`mmfeed index` rebuilding one)
  // Where a manifest without an index beside it (local), or any remote one, has its index kept:
  // fetched from beside it (remote) or built, once a node, under a lock.
  std::string cache_dir;
  std::vector<std::string> media_root;  // the Loader's: where an index built reads relative media's headers
};

// Reads the sources in order, each one manifest, whatever files it names (source_files.h: a file,
// a brace pattern, a glob, a folder): JSONL and JSON files (several of them one manifest of
// parts), tar shards, Energon datasets, Parquet and Arrow files. A UTF-8 byte-order mark is
// skipped, blank lines are not indexed. An error names the source or file (fetch, decompression,
// the limit, an array not closed or followed by more, a layout not read) or says that none holds
// a sample. A local JSONL or JSON file with an index beside it opens from the index (its text
// not read; the limit does not apply to it); an index beside it that does not check out is an
// error naming it. Without one, and with `indexes.cache_dir`, the file is indexed there (the
// first reader of the node builds it under a lock, the others wait for it), a stale one there
// rebuilt, and opened from it. A remote one (uncompressed, its server sending an ETag) with
// `indexes.cache_dir` likewise: its index there when current, else the one beside it
// ("<uri>.mmidx") fetched into it (an error naming that index where it does not check out), else
// built there from its text (read once a node); then its samples' text is read by ranged GETs.
Result<Manifests> read_manifests(const std::vector<std::string>& paths, std::size_t max_bytes,
                                 const storage::S3Options& s3, const Indexes& indexes = {});

// Where relative references of a manifest at `uri` resolve: its directory, or its URI prefix
// in the URI's own spelling (to_string redacts) without its query: "https://h/d/m.jsonl?X-Amz-..."
// -> "https://h/d".
std::string base_dir_of(const storage::ObjectUri& uri);

// Indexes the samples of `m` (its text and name set), appending them to `out` as samples of
// manifest number `manifest`: a JSON array's elements when its first non-blank byte is '[' (and
// sets m.array), else its non-blank lines. An array that is not closed, closes a bracket that is
// not open or is followed by more is refused, naming the byte.
Status index_samples(Manifest& m, std::uint32_t manifest, std::vector<ManifestLine>& out);
// The same over `text` (named `name`), `array` set.
Status index_samples(std::string_view text, const std::string& name, std::uint32_t manifest, bool& array,
                     std::vector<ManifestLine>& out);

// The local JSONL or JSON file at `path` (shown as `name`) read for indexing it: mapped and its
// samples found in the mapping, each sample's text then read by its byte range, the CRC-32 the
// Loader takes of it computed over the mapping. No copy of the file is held, so no
// max_manifest_bytes bounds it (its lines are, 24 bytes each).
Result<Manifests> read_mapped_manifest(const std::string& path, const std::string& name);

// The media root manifest `manifest` takes from the media_root option: one root for every
// manifest, or one per manifest (the caller checks the count); empty: none given.
std::string_view media_root_of(const std::vector<std::string>& media_roots, std::size_t manifest);

// A sample's media reference as a URI: absolute ones as they are, relative ones against
// `media_root` when given (a directory or a URI prefix: the dataset's image folder), else
// `base_dir`, the directory (or URI prefix, when the manifest is remote) of the sample's file. A remote manifest is
// written by whoever controls its origin: a reference of one that resolves to a local file (an
// absolute path, a file:// URI) is refused with kPermissionDenied unless `allow_local_from_remote`
// (LoaderConfig::allow_local_media_from_remote_manifest) or the reference is relative to a local
// media_root, which the user chose.
// Example (m: a manifest read from https://h/data/train.jsonl):
//   resolve("/etc/passwd", m, m.base_dir, "", false).error().code()         // kPermissionDenied
//   resolve("img/a.jpg", m, m.base_dir, "", false)->url                      // "https://h/data/img/a.jpg"
//   resolve("img/a.jpg", m, m.base_dir, "s3://b/coco/", false)->to_string()  // "s3://b/coco/img/a.jpg"
Result<storage::ObjectUri> resolve(std::string_view ref, const Manifest& manifest, std::string_view base_dir,
                                   std::string_view media_root, bool allow_local_from_remote);

// Where a medium's bytes are: an object, or a byte range of one (a member of a tar shard).
struct MediaSource {
  storage::ObjectUri uri;
  std::optional<storage::ByteRange> range;
  std::string member;                       // the shard member's name; empty: the whole object
  std::shared_ptr<const ParquetCell> cell;  // a Parquet image: `range` holds its page, decoded by parquet_value()

  // "s3://b/a.jpg", or "s3://b/shard-0.tar[a1.0.jpg]".
  std::string to_string() const { return member.empty() ? uri.to_string() : uri.to_string() + "[" + member + "]"; }
};

// A sample's media reference: a member of its shard when the sample comes from tar shards and
// the reference names one of its members by suffix ("0.jpg", "jpg") or full name, else resolve().
// A bare name that is no member of a shard sample is an error listing the members it has. A shard
// sample known by its range gives `range`, what read_range() read of it.
Result<MediaSource> resolve_media(std::string_view ref, const Manifests& manifests, const ManifestLine& line,
                                  std::string_view media_root, bool allow_local_from_remote,
                                  const RangeSample* range = nullptr);

struct MediaRef {
  MediaSource source;
  std::string sample_id;  // the sample's id, else its manifest:line
};

// Every image, video and audio clip the samples name, in manifest order, resolved as the Loader
// resolves them (resolve(), with the same media roots and local-file policy). A sample that does
// not parse as a conversation, or names a URI that does not parse or is refused, is an error
// naming it.
Result<std::vector<MediaRef>> media_of(const Manifests& manifests, const std::vector<std::string>& media_roots,
                                       bool allow_local_from_remote);

}  // namespace mmfeed::dataset
