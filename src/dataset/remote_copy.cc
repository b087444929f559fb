// A remote manifest copied into a local file to index it (remote_copy.h).
#include "dataset/remote_copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/owned_fd.h"
#include "storage/fetcher.h"

namespace mmfeed::dataset {

namespace {

Status write_at(int fd, const std::byte* data, std::size_t size, std::uint64_t at, const std::string& path) {
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error(ErrorCode::kIoError, std::string("cannot write the copy: ") + std::strerror(errno), path);
    done += static_cast<std::size_t>(n);
  }
  return ok_status();
}

}  // namespace

Status copy_remote(const storage::ObjectUri& uri, const std::string& name, const SourceStamp& stamp,
                   const storage::S3Options& s3, const std::string& path) {
  const core::OwnedFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.fd < 0) return Error(ErrorCode::kIoError, std::string("cannot create it: ") + std::strerror(errno), path);
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = kCopyPart;
  options.max_inflight = kCopyInFlight;
  storage::Fetcher fetcher(options, s3);
  const std::uint64_t parts = (stamp.size + kCopyPart - 1) / kCopyPart;
  const auto length_of = [&](std::uint64_t part) { return std::min(kCopyPart, stamp.size - part * kCopyPart); };
  std::uint64_t next = 0, in_flight = 0;
  const auto submit = [&]() {
    const bool sent = fetcher.submit({uri, next, storage::ByteRange{next * kCopyPart, length_of(next)}, stamp.etag});
    ++next;
    ++in_flight;
    return sent ? ok_status() : Status(Error(ErrorCode::kInternal, "fetcher closed", name));
  };
  while (next < parts && in_flight < kCopyInFlight) MMFEED_RETURN_IF_ERROR(submit());
  while (in_flight > 0) {
    std::optional<storage::FetchResult> r = fetcher.next();
    if (!r) return Error(ErrorCode::kInternal, "fetcher closed", name);
    --in_flight;
    if (!r->data.ok()) {
      if (r->http_status == 412) {
        return Error(ErrorCode::kUnavailable,
                     "replaced while it was indexed (ETag " + stamp.etag + " no longer matches); index it again", name);
      }
      return std::move(r->data).error().with_context("manifest");
    }
    const std::uint64_t want = length_of(r->tag);
    if (r->data->size() != want) {
      return Error(ErrorCode::kCorruptData,
                   "answered " + std::to_string(r->data->size()) + " bytes for the " + std::to_string(want) +
                       " at byte " + std::to_string(r->tag * kCopyPart),
                   name);
    }
    MMFEED_RETURN_IF_ERROR(write_at(out.fd, r->data->data(), r->data->size(), r->tag * kCopyPart, path));
    if (next < parts) MMFEED_RETURN_IF_ERROR(submit());
  }
  return ok_status();
}

Result<std::string> read_source_range(const storage::ObjectUri& uri, const std::string& name, const SourceStamp& stamp,
                                      const storage::S3Options& s3, std::uint64_t begin, std::uint64_t length) {
  storage::FetchOptions options;
  options.part_size = 0;
  options.max_object_bytes = length;
  storage::Fetcher fetcher(options, s3);
  if (!fetcher.submit({uri, 0, storage::ByteRange{begin, length}, stamp.etag})) {
    return Error(ErrorCode::kInternal, "fetcher closed", name);
  }
  fetcher.close();
  std::optional<storage::FetchResult> r = fetcher.next();
  if (!r) return Error(ErrorCode::kInternal, "fetcher closed", name);
  if (!r->data.ok()) {
    if (r->http_status == 412) {
      return Error(ErrorCode::kUnavailable,
                   "replaced while it was indexed (ETag " + stamp.etag + " no longer matches); index it again", name);
    }
    return std::move(r->data).error().with_context("manifest");
  }
  if (r->data->size() != length) {
    return Error(ErrorCode::kCorruptData,
                 "answered " + std::to_string(r->data->size()) + " bytes for the " + std::to_string(length) +
                     " at byte " + std::to_string(begin),
                 name);
  }
  return std::string(reinterpret_cast<const char*>(r->data->data()), r->data->size());
}

}  // namespace mmfeed::dataset
