// The indexes of file sets (index_sets.h): each file's own, beside it or in --out DIR.
#include "dataset/index_sets.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/mapped_file.h"
#include "dataset/index.h"
#include "dataset/manifest.h"
#include "dataset/parquet_index.h"
#include "dataset/shards.h"
#include "dataset/source_files.h"
#include "dataset/wids.h"
#include "mmfeed/index.h"
#include "storage/redact.h"
#include "storage/uri.h"

namespace mmfeed::dataset {

namespace {

constexpr std::size_t kNamed = kSummaryNamed;

// Where --out DIR puts the index of each of `files` (source `source`): DIR/<file's name><suffix>,
// the folder created; none without --out (each beside its file).
Result<std::vector<std::string>> indexes_in_out_dir(const std::string& source, const std::vector<std::string>& files,
                                                    const IndexOptions& options, const std::string& suffix) {
  if (!options.cache_dir.empty()) {
    return Error(
        ErrorCode::kInvalidArgument,
        "these files' indexes lie beside them (FILE" + suffix + ", or in --out DIR to upload there): no --cache-dir",
        storage::redact_uri(source));
  }
  std::vector<std::string> paths;
  if (options.out.empty()) return paths;
  std::error_code ec;
  std::filesystem::create_directories(options.out, ec);
  if (ec) return Error(ErrorCode::kIoError, "cannot create the --out folder: " + ec.message(), options.out);
  for (const std::string& name : files) {
    const std::string plain = name.substr(0, name.find_first_of("?#"));
    paths.push_back((std::filesystem::path(options.out) / (plain.substr(plain.rfind('/') + 1) + suffix)).string());
    if (std::count(paths.begin(), paths.end(), paths.back()) > 1) {
      return Error(ErrorCode::kInvalidArgument, "two files of one name: their indexes would share " + paths.back(),
                   storage::redact_uri(name));
    }
  }
  return paths;
}

// What the summary of a set of files indexed one by one calls its index: the pattern's name with
// `suffix`, beside it or in --out DIR.
std::string set_index_name(const std::string& source, const IndexOptions& options, const std::string& suffix) {
  const std::string pattern = storage::redact_uri(source);
  return options.out.empty()
             ? pattern + suffix
             : (std::filesystem::path(options.out) / (pattern.substr(pattern.rfind('/') + 1) + suffix)).string();
}

}  // namespace

// Parquet files `files` (source `source`): an index beside each local one (parquet_index.h), or
// in --out DIR; one whose index is current is kept; one that cannot be indexed is named.
Result<IndexSummary> index_parquet(const std::string& source, const std::vector<std::string>& files,
                                   const IndexOptions& options, const storage::S3Options& s3) {
  MMFEED_ASSIGN_OR_RETURN(const std::vector<std::string> paths, indexes_in_out_dir(source, files, options, ".mmidx"));
  IndexSummary summary;
  summary.parquet = true;
  summary.path = set_index_name(source, options, ".mmidx");
  for (std::size_t k = 0; k < files.size(); ++k) {
    MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(files[k]));
    if (uri.scheme != storage::Scheme::kFile && paths.empty()) {
      return Error(ErrorCode::kInvalidArgument,
                   "a remote Parquet file's index is written into --out DIR, to upload beside it",
                   storage::redact_uri(files[k]));
    }
    const std::string out = paths.empty() ? index_path_of(uri.path) : paths[k];
    if (auto held = core::MappedFile::open(out); held.ok()) {  // current: kept
      Manifest rows;
      std::vector<ManifestLine> lines;
      auto now = stamp_source(files[k], s3);
      if (now.ok() && read_parquet_index(held->bytes(), out, *now, SIZE_MAX, 0, rows, lines).ok()) {
        ++summary.shards_kept;
        summary.samples += lines.size();
        summary.images += rows.members.size();
        summary.index_bytes += held->size();
        continue;
      }
    }
    auto built = write_parquet_index(files[k], out, s3);
    if (!built.ok()) {
      ++summary.shards_damaged;
      ++summary.bad_count;
      if (summary.bad.size() < kNamed) summary.bad.push_back(built.error().to_string());
      continue;
    }
    ++summary.shards_indexed;
    summary.samples += built->rows;
    summary.images += built->images;
    summary.index_bytes += built->bytes;
    summary.media_unreadable += built->unreadable;
  }
  return summary;
}

// Local WebDataset shards `shards` (source `source`): a .tar.idx beside each.
Result<IndexSummary> index_shards(const std::string& source, const std::vector<std::string>& shards,
                                  const IndexOptions& options, const storage::S3Options& s3) {
  MMFEED_ASSIGN_OR_RETURN(const std::vector<std::string> paths, indexes_in_out_dir(source, shards, options, ".idx"));
  MMFEED_ASSIGN_OR_RETURN(TarIndexesWritten w, write_tar_indexes(shards, paths, kDefaultMaxManifestBytes, s3, kNamed));
  IndexSummary summary;
  summary.path = set_index_name(source, options, ".idx");
  summary.samples = w.samples;
  summary.index_bytes = w.bytes;
  summary.shards_indexed = w.written;
  summary.shards_kept = w.kept;
  summary.shards_damaged = w.damaged_count;
  summary.bad = std::move(w.damaged);
  for (std::string& b : w.bad) {
    if (summary.bad.size() < kNamed) summary.bad.push_back(std::move(b));
  }
  summary.bad_count = w.bad_count;
  return summary;
}

// The local .json file at `path` (shown as `name`) as a wids descriptor; nullopt where it is none.
Result<std::optional<WidsShards>> local_wids_descriptor(const std::string& path, const std::string& name) {
  constexpr std::size_t kMaxDescriptorBytes = std::size_t{64} << 20;
  std::ifstream in(path, std::ios::binary);
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (!parse_wids_descriptor(text, name, "").ok()) {  // its head names "wids_version": read it whole
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec || size > kMaxDescriptorBytes) return std::optional<WidsShards>();
    in.seekg(0);
    text.assign(static_cast<std::size_t>(size), '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<std::size_t>(in.gcount()));
  }
  return parse_wids_descriptor(text, name, std::filesystem::path(path).parent_path().string());
}

}  // namespace mmfeed::dataset

namespace mmfeed {

Result<IndexFiles> index_files(const std::string& source) {
  MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(source));
  storage::S3Options s3;
  if (uri.scheme != storage::Scheme::kFile) {
    MMFEED_ASSIGN_OR_RETURN(s3, storage::s3_options_from_environment());
  }
  const dataset::Layout layout = dataset::layout_of(source.substr(0, source.find_first_of("?#")));
  if (layout == dataset::Layout::kShards || layout == dataset::Layout::kParquet) {
    MMFEED_ASSIGN_OR_RETURN(dataset::SourceFiles files, dataset::source_files(source, s3));
    return IndexFiles{layout == dataset::Layout::kShards ? "shards" : "parquet", std::move(files.files)};
  }
  if (uri.scheme == storage::Scheme::kFile && source.ends_with(".json")) {
    MMFEED_ASSIGN_OR_RETURN(std::optional<dataset::WidsShards> wids,
                            dataset::local_wids_descriptor(uri.path, storage::redact_uri(source)));
    if (wids) return IndexFiles{"shards", std::move(wids->urls)};
  }
  return IndexFiles{"manifest", {source}};
}

}  // namespace mmfeed
