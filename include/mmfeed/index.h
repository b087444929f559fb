// A dataset index (the first part of opening at cluster scale): for each sample of a JSONL or
// JSON-array manifest, where its text lies in the file (a byte range), what it names (its
// images, videos and audio clips) and their cost facts, read from the media's headers (an
// image's size, a video's frame size, frame rate and duration, a clip's duration: what balancing
// ranks by compute needs without decoding), in fixed-width records behind a checksummed header bound to
// the file it was built from (its size, its modification time or, remote, its ETag, and its
// CRC-32). A stale index (the file changed since), a foreign one (another file's), a truncated or
// tampered one is refused by name, never used. Written by `mmfeed index SOURCE` beside a local
// SOURCE (SOURCE.mmidx); a remote one's (s3://, http(s)://) where --out or --cache-dir says.
//
// The layout (little-endian; docs/data.md, "The dataset index"):
//   header, 96 bytes: magic "mmfeedIX", version (u32) 3, record size (u32) 40, samples (u64),
//     the source's size (u64), its mtime in ns (i64; 0 remote), its CRC-32 (u32), the block
//     table's CRC-32 (u32), where its text starts (u32: 3 after a UTF-8 byte-order mark), flags
//     (u32: bit 0 a JSON array), media entries (u64), records a block (u32) 256, the media entry
//     size (u32) 16, the block table entry size (u32) 16, the text tokens' key (u32:
//     text_tokens_key() of the tokenizer and chat template that counted them; 0: not counted), the
//     CRC-32 of a remote source's ETag (u32; 0 local, never 0 remote), 8 reserved bytes, the
//     CRC-32 of the 92 bytes before (u32);
//   the block table, an entry for each 256 records (the last block holds the rest), 16 bytes: the
//     CRC-32 of its records (u32), the CRC-32 of its media entries (u32: from its first record's
//     first entry to the next block's), its first record's first media entry (u64);
//   a record a sample, 40 bytes: its byte offset in the file (u64), its line number (JSONL,
//     1-based) or element index (array) (u64), its first media entry (u64), its length (u32), its
//     text's tokens (u32, 0: not counted), its images, videos and audio clips (u16 each), flags
//     (u16: bit 0 its text is no conversation);
//   a media entry a medium, the sample's images, then its videos, then its audio clips, in the
//     order its text names them, 16 bytes: width and height (u32 each: an image's upright, a
//     video's frame), duration in ms (u32: a video's or a clip's), frame rate in 1/100 fps (u16),
//     kind (u8: 1 image, 2 video, 3 audio), what is known (u8: 0 read from the medium's header,
//     1 unreadable, 2 not probed).
// Example:
//   MMFEED_ASSIGN_OR_RETURN(IndexSummary s, build_index("train.jsonl"));   // train.jsonl.mmidx
//   MMFEED_ASSIGN_OR_RETURN(DatasetIndex index, open_index(s.path, "train.jsonl"));
//   index.records[7].offset;   // where sample 7's line begins in train.jsonl
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed {

inline constexpr std::uint32_t kIndexVersion = 3;

struct IndexRecord {
  std::uint64_t offset = 0;       // of the sample's text in the source file
  std::uint64_t number = 0;       // its line (1-based) or array element (0-based)
  std::uint64_t first_media = 0;  // its first entry in DatasetIndex::media
  std::uint32_t length = 0;       // bytes of its text
  std::uint32_t text_tokens = 0;  // its text's tokens; 0: not counted (its length stands for them)
  std::uint16_t images = 0, videos = 0, audio = 0;
  bool bad = false;  // its text is no conversation (the Loader skips it and names it)

  std::uint32_t media() const { return std::uint32_t{images} + videos + audio; }
};

// What a medium's header says of its cost (how many patches, frames, seconds it becomes).
struct MediaFacts {
  enum class Kind : std::uint8_t { kImage = 1, kVideo = 2, kAudio = 3 };
  enum class Known : std::uint8_t { kRead = 0, kUnreadable = 1, kNotProbed = 2 };
  Kind kind = Kind::kImage;
  Known known = Known::kNotProbed;
  std::uint32_t width = 0, height = 0;  // an image's, upright (EXIF applied); a video's frame
  std::uint32_t duration_ms = 0;        // a video's or an audio clip's
  std::uint16_t fps_centi = 0;          // a video's frame rate, in 1/100 frames a second
};

struct DatasetIndex {
  std::uint64_t source_size = 0;
  std::int64_t source_mtime_ns = 0;
  std::uint32_t source_crc32 = 0;     // of the text the Loader reads (after a byte-order mark)
  bool array = false;                 // the source is one JSON array
  std::uint32_t tokens_key = 0;       // text_tokens_key() of what counted the records' text_tokens; 0: none
  std::uint32_t source_etag_crc = 0;  // a remote source's: the CRC-32 of its ETag; 0: a local file
  std::vector<IndexRecord> records;
  std::vector<MediaFacts> media;  // by IndexRecord::first_media
};

struct IndexSummary {
  std::string path;  // the index written
  std::uint64_t samples = 0, images = 0, videos = 0, audio = 0;
  std::uint64_t text_bytes = 0;         // the samples' text, summed
  std::uint64_t index_bytes = 0;        // the index file's size
  std::vector<std::string> bad;         // "train.jsonl:12: reason", the samples that are no conversation
  std::uint64_t bad_count = 0;          // all of them (`bad` names the first 100)
  std::uint64_t media_unreadable = 0;   // media whose header could not be read (missing, not media)
  std::vector<std::string> unreadable;  // "train.jsonl:12: img/a.jpg: reason", the first 100
  std::uint64_t media_not_probed = 0;   // media not read (--no-media): facts unknown
  std::uint64_t text_tokens = 0;        // the samples' text tokens, summed (0: not counted)
  // Of WebDataset shards: .tar.idx files written now, kept (current already), and shards given
  // none (damaged: named in `bad`, with the samples that will fail; a Loader scans such a set).
  // Of Parquet files (`parquet`): their indexes (FILE.mmidx) likewise, and the files given none
  // (named in `bad`: unreadable, or their images in compressed pages; a Loader reads them whole).
  std::uint64_t shards_indexed = 0, shards_kept = 0, shards_damaged = 0;
  bool parquet = false;
  std::uint64_t resumed_samples = 0;  // described by a build stopped before, taken from its journal
};

struct IndexOptions {
  // Where to write the index; empty: source + ".mmidx" beside a local source (a remote one's needs
  // `out` or `cache_dir`: it is written here, then uploaded beside it or kept in a node cache).
  std::string out;
  // Where relative media references resolve (the Loader's media_root); empty: the source's folder.
  std::string media_root;
  bool probe_media = true;  // false: no medium's header read (its facts "not probed")
  // Where given, each sample's text tokens are counted as the Loader encodes its conversation with
  // this tokenizer.json and chat template (text/chat.h's names; empty: `model`'s, as the Loader
  // takes it), each medium's placeholder apart: what the media add is their facts' to say.
  std::string tokenizer{};
  std::string model = "qwen2-vl";
  std::string chat_template{};
  // Where given (and `out` not), the index is written where a Loader with this cache_dir looks
  // for the source's index: a node cache filled ahead of the ranks.
  std::string cache_dir{};
  // Samples described between checkpoints: each chunk is kept in a journal beside the index as it
  // ends (index.journal), so a build stopped part-way resumes from its last chunk (> 0).
  std::uint64_t checkpoint_samples = 65536;
  // Where given: the samples described elsewhere (describe_index_part over the ranges of
  // plan_index_parts, in order), taken instead of describing them here; each checked to be of
  // this version of the source and these options and to hold exactly its range's samples.
  std::vector<std::string> parts{};
};

// What binds an index's text tokens to what counted them: the CRC-32 of the tokenizer file's
// bytes, continued over a NUL and the chat template's name as mmfeed shows it ("Qwen2-VL",
// text/chat.h's chat_template_name) (never 0). A Loader trusts an index's text
// tokens only where its own tokenizer and template give the same key.
Result<std::uint32_t> text_tokens_key(const std::string& tokenizer_path, std::string_view chat_template);

// Indexes the uncompressed JSONL or JSON-array manifest `source` (a local file, or an s3:// or
// http(s):// object whose server sends an ETag; S3 credentials from the environment, as the
// Loader's) into options.out, written whole to a temporary file and renamed into place (never
// rewritten in place: readers map it), so a reader never meets half an index. A remote object
// replaced while it is read is an error. A sample that is no conversation is indexed, flagged and
// named; a local medium's header is read, a remote image's from its first bytes (a ranged GET), a
// remote video's or audio clip's container header from its first and, where need be, last bytes;
// one that cannot be read is counted and named, its facts marked unreadable.
//
// A source of local WebDataset shards ("shard-{000..127}.tar") gets the .tar.idx energon prepare
// writes, beside each shard (the same bytes), from which a Loader opens it without reading the
// shards; a shard whose .tar.idx is current is kept, so an interrupted run resumes. Parquet files
// ("train-{00000..00009}.parquet") likewise get FILE.mmidx each (src/dataset/parquet_index.h: the
// rows' text, each image's own byte range and size), from which a Loader opens them without
// reading them and fetches each image alone.
Result<IndexSummary> build_index(const std::string& source, const IndexOptions& options = {});

// What build_index indexes `source` as: "shards" or "parquet", with the files it indexes one by
// one (each gets an index of its own: a shard's .tar.idx, a Parquet file's .mmidx; a local wids
// descriptor's shards), or "manifest", with `source` itself (one index, which can be built in
// parts, below). An error names the source (a pattern that matches nothing, a damaged descriptor).
struct IndexFiles {
  std::string kind;
  std::vector<std::string> files;
};
Result<IndexFiles> index_files(const std::string& source);

// A manifest's index built in parts on many machines (mmfeed.ray.build_index): its text cut into
// byte ranges (plan_index_parts), each range's samples described apart (describe_index_part: the
// range read by itself, its media's headers, its text tokens: the costly part of a build), and
// the parts handed to build_index (IndexOptions::parts), which writes the index a whole build
// writes, the same bytes.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(std::vector<IndexPartRange> ranges, plan_index_parts("s3://b/train.jsonl", 64));
//   for (const IndexPartRange& r : ranges) options.parts.push_back(describe_index_part(source, r, options).value());
//   MMFEED_ASSIGN_OR_RETURN(IndexSummary s, build_index(source, options));
struct IndexPartRange {
  std::uint64_t begin = 0, end = 0;  // bytes of the text (after a byte-order mark)
};

// `source`'s text cut into about `parts` ranges of equal bytes (at least 1 MiB each), which
// describe_index_part moves to line starts; a JSON array's text (its elements are no lines) in
// one. An error names the source: not found, compressed (kUnsupported).
Result<std::vector<IndexPartRange>> plan_index_parts(const std::string& source, std::uint64_t parts);

// The samples whose lines start in `range` (a line starting before range.begin belongs to the part
// before), described as build_index describes them, as bytes for IndexOptions::parts: the range
// read alone (a ranged GET, pinned to the object's ETag, where remote), at most 4 GiB of it held.
// An error names the source: not found, compressed, a range past its text, a JSON array's text cut.
Result<std::string> describe_index_part(const std::string& source, IndexPartRange range, const IndexOptions& options);

// The index at `path`, checked whole against itself and against `source` (its size, and its mtime
// or ETag):
// an error naming the index and what is wrong otherwise (not an index, another version,
// truncated, its header or records altered, its source changed since it was built).
Result<DatasetIndex> open_index(const std::string& path, const std::string& source);

}  // namespace mmfeed
