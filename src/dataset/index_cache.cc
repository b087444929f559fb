// Opening a JSONL or JSON manifest from its dataset index (index_cache.h): beside a local file,
// or in the node cache, fetched from beside a remote one or built there once a node under a lock.
#include "dataset/index_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "dataset/index.h"
#include "dataset/shards.h"
#include "storage/fetcher.h"
#include "storage/redact.h"

namespace mmfeed::dataset {

namespace {

// What opening a manifest from an index needs beside the file's name.
struct IndexContext {
  const storage::S3Options& s3;
  std::size_t limit;  // max_manifest_bytes: the longest sample text read
};

// The manifest `file` (at `uri`) opened from the index at `index`, its stamp `now`: its samples
// stay in the index, its text where it lies. An index whose header or block table does not check
// out, or bound to another version of the file, is an error naming it.
Result<Manifest> open_from_index(const std::string& file, const storage::ObjectUri& uri, const std::string& index,
                                 const SourceStamp& now, const IndexContext& context) {
  Manifest m;
  m.name = storage::redact_uri(file);
  m.base_dir = base_dir_of(uri);
  if (uri.scheme != storage::Scheme::kFile) {
    MMFEED_ASSIGN_OR_RETURN(std::shared_ptr<const MappedIndex> mapped, MappedIndex::open(index, m.name, now));
    const IndexHeader& header = mapped->header();
    m.indexed = std::make_shared<RemoteText>(uri, m.name, now.etag, header.text_start,
                                             header.source_size - header.text_start, context.s3, context.limit);
    m.remote = true;
    m.crc32 = header.source_crc32;
    m.array = header.array;
    m.index = std::move(mapped);
    return m;
  }
  // The file is opened before its index is checked against it, and checked again once open: the
  // text read later is the text indexed, whatever replaces the path since.
  OwnedFd fd(::open(uri.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) return Error(ErrorCode::kNotFound, "cannot open it", m.name);
  MMFEED_ASSIGN_OR_RETURN(std::shared_ptr<const MappedIndex> mapped, MappedIndex::open(index, file, now));
  const IndexHeader& header = mapped->header();
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != header.source_size) {
    return Error(ErrorCode::kInvalidArgument, "stale: " + m.name + " changed while it was opened", index);
  }
  m.indexed =
      std::make_shared<LocalText>(fd.release(), m.name, header.text_start, header.source_size - header.text_start);
  m.crc32 = header.source_crc32;
  m.array = header.array;
  m.index = std::move(mapped);
  return m;
}

// `file` opened from the node cache's index `index`: under the entry's lock, the cached index is
// opened when current, else (a remote file) the one beside it fetched into the cache, else one
// built there (the first reader of the node) and opened; nullopt when the file is no manifest an
// index serves (compressed).
Result<std::optional<Manifest>> open_cached(const std::string& file, const storage::ObjectUri& uri,
                                            const std::string& index, std::string_view media_root,
                                            const SourceStamp& now, const IndexContext& context) {
  MMFEED_ASSIGN_OR_RETURN(const std::unique_ptr<OwnedFd> lock, lock_cache_entry(index, file));
  // Locked: built or fetched by another reader since, and current?
  if (auto m = open_from_index(file, uri, index, now, context); m.ok()) return std::optional<Manifest>(std::move(*m));
  if (uri.scheme != storage::Scheme::kFile) {
    MMFEED_ASSIGN_OR_RETURN(const bool fetched, fetch_index_beside(file, uri, index, context.s3, context.limit));
    if (fetched) {
      auto m = open_from_index(file, uri, index, now, context);
      if (m.ok()) return std::optional<Manifest>(std::move(*m));
      std::error_code ec;
      std::filesystem::remove(index, ec);  // never used: the next reader fetches it again
      return std::move(m).error().with_context(storage::redact_uri(index_path_of(file)) +
                                               ", fetched into the cache_dir");
    }
  }
  IndexOptions options;
  options.out = index;
  options.media_root = std::string(media_root);
  auto built = build_index(file, options);
  if (!built.ok() && built.error().code() == ErrorCode::kUnsupported) return std::optional<Manifest>();
  if (!built.ok()) return std::move(built).error().with_context("cache_dir");
  MMFEED_ASSIGN_OR_RETURN(const SourceStamp after, stamp_source(file, context.s3));
  MMFEED_ASSIGN_OR_RETURN(Manifest m, open_from_index(file, uri, index, after, context));
  m.index_built = true;
  return std::optional<Manifest>(std::move(m));
}

}  // namespace

Result<std::unique_ptr<OwnedFd>> lock_cache_entry(const std::string& index, const std::string& file) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(index).parent_path(), ec);
  if (ec) return Error(ErrorCode::kIoError, "cannot create the cache_dir: " + ec.message(), index);
  const std::string lock_path = index + ".lock";
  auto lock = std::make_unique<OwnedFd>(::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644));
  if (lock->fd < 0) {
    return Error(ErrorCode::kIoError, std::string("cannot open the lock: ") + std::strerror(errno), lock_path);
  }
  const auto deadline = std::chrono::steady_clock::now() + kIndexBuildWait;
  while (::flock(lock->fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return Error(ErrorCode::kIoError, std::string("cannot lock: ") + std::strerror(errno), lock_path);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Error(ErrorCode::kTimeout,
                   "another process held the lock for " + std::to_string(kIndexBuildWait.count()) +
                       " minutes while indexing " + storage::redact_uri(file),
                   lock_path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return lock;
}

Result<bool> fetch_index_beside(const std::string& file, const storage::ObjectUri& uri, const std::string& index,
                                const storage::S3Options& s3, std::size_t limit) {
  if (uri.scheme != storage::Scheme::kS3 && uri.url.find_first_of("?#") != std::string::npos) return false;
  const std::string beside = index_path_of(file);
  MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri beside_uri, storage::parse_uri(beside));
  storage::FetchOptions options;
  options.max_object_bytes = std::max<std::uint64_t>(limit, std::uint64_t{1} << 30);
  options.max_object_bytes_option = "max_manifest_bytes";
  storage::Fetcher fetcher(options, s3);
  if (!fetcher.submit({beside_uri, 0, std::nullopt})) return Error(ErrorCode::kInternal, "fetcher closed", beside);
  fetcher.close();
  std::optional<storage::FetchResult> r = fetcher.next();
  if (!r) return Error(ErrorCode::kInternal, "fetcher closed", beside);
  if (!r->data.ok()) {
    const ErrorCode code = r->data.error().code();
    if (code == ErrorCode::kNotFound || code == ErrorCode::kPermissionDenied) return false;
    return std::move(r->data).error().with_context("the index beside the manifest");
  }
  MMFEED_RETURN_IF_ERROR(core::write_file_whole(index, r->data->span()));
  return true;
}

Result<std::optional<Manifest>> open_indexed(const std::string& file, const Indexes& indexes, std::uint32_t manifest,
                                             const storage::S3Options& s3, std::size_t limit) {
  const IndexContext context{s3, limit};
  MMFEED_ASSIGN_OR_RETURN(storage::ObjectUri uri, storage::parse_uri(file));
  const bool local = uri.scheme == storage::Scheme::kFile;
  std::error_code ec;
  const std::string beside = local ? index_path_of(uri.path) : std::string();
  const bool has_beside = local && std::filesystem::exists(beside, ec);
  if (!has_beside && indexes.cache_dir.empty()) return std::optional<Manifest>();
  auto now = stamp_source(file, context.s3);
  if (!now.ok() && now.error().code() == ErrorCode::kUnsupported) return std::optional<Manifest>();  // no ETag
  if (!now.ok()) return std::move(now).error();
  if (has_beside) {
    MMFEED_ASSIGN_OR_RETURN(Manifest m, open_from_index(file, uri, beside, *now, context));
    return std::optional<Manifest>(std::move(m));
  }
  if (compressed(now->head)) return std::optional<Manifest>();
  return open_cached(file, uri, cached_index_path(indexes.cache_dir, file), media_root_of(indexes.media_root, manifest),
                     *now, context);
}

Result<std::optional<Manifest>> open_cached_shards(const std::string& source, const std::vector<std::string>& shards,
                                                   const std::string& cache_dir, std::size_t limit) {
  std::vector<std::string> paths;
  for (const std::string& name : shards) {
    MMFEED_ASSIGN_OR_RETURN(const storage::ObjectUri uri, storage::parse_uri(name));
    if (uri.scheme != storage::Scheme::kFile) return std::optional<Manifest>();
    std::string path = cached_index_path(cache_dir, uri.path);
    path.replace(path.size() - std::string_view(".mmidx").size(), std::string::npos, ".idx");
    paths.push_back(std::move(path));
  }
  MMFEED_ASSIGN_OR_RETURN(const std::unique_ptr<OwnedFd> lock,
                          lock_cache_entry(cached_index_path(cache_dir, source), source));
  auto opened = open_tar_indexes(source, shards, paths);
  if (opened.ok() && *opened) return opened;
  // Missing or stale there: written (those current kept), then opened.
  MMFEED_ASSIGN_OR_RETURN(const TarIndexesWritten written, write_tar_indexes(shards, paths, limit, {}, 0));
  if (written.damaged_count > 0) return std::optional<Manifest>();
  MMFEED_ASSIGN_OR_RETURN(opened, open_tar_indexes(source, shards, paths));
  if (*opened) (*opened)->index_built = written.written > 0;
  return opened;
}

}  // namespace mmfeed::dataset
