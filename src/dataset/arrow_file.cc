#include "dataset/arrow_file.h"

#include <arrow/buffer.h>
#include <arrow/io/file.h>

#include <algorithm>
#include <mutex>

namespace mmfeed::dataset {

namespace {

// The bytes of a fetched range, held by an Arrow buffer without a copy.
class FetchedBuffer : public arrow::Buffer {
 public:
  explicit FetchedBuffer(core::Buffer held)
      : arrow::Buffer(reinterpret_cast<const std::uint8_t*>(held.data()), static_cast<std::int64_t>(held.size())),
        held_(std::move(held)) {}

 private:
  core::Buffer held_;
};

// A remote Parquet file as Arrow reads it: each read a ranged GET through the fetcher (its
// retries and deadlines), one at a time.
class RemoteFile : public arrow::io::RandomAccessFile {
 public:
  RemoteFile(storage::Fetcher& fetcher, storage::ObjectUri uri, std::string name, std::int64_t size)
      : fetcher_(fetcher), uri_(std::move(uri)), name_(std::move(name)), size_(size) {}

  arrow::Status Close() override {
    closed_ = true;
    return arrow::Status::OK();
  }
  bool closed() const override { return closed_; }
  arrow::Result<std::int64_t> Tell() const override { return position_; }
  arrow::Status Seek(std::int64_t position) override {
    if (position < 0) return arrow::Status::Invalid("negative position");
    position_ = position;
    return arrow::Status::OK();
  }
  arrow::Result<std::int64_t> GetSize() override { return size_; }

  arrow::Result<std::shared_ptr<arrow::Buffer>> ReadAt(std::int64_t position, std::int64_t nbytes) override {
    std::lock_guard lock(mu_);
    if (position < 0 || nbytes < 0) return arrow::Status::Invalid("negative read");
    const std::int64_t n = std::min(nbytes, std::max<std::int64_t>(0, size_ - position));
    if (n == 0) return std::make_shared<arrow::Buffer>(nullptr, 0);
    const storage::ByteRange range{static_cast<std::uint64_t>(position), static_cast<std::uint64_t>(n)};
    if (!fetcher_.submit({uri_, 0, range})) return arrow::Status::IOError(name_, ": the fetcher closed");
    auto r = fetcher_.next();
    if (!r) return arrow::Status::IOError(name_, ": the fetcher closed");
    if (!r->data.ok()) return arrow::Status::IOError(r->data.error().to_string());
    if (static_cast<std::int64_t>(r->data->size()) != n) {
      return arrow::Status::IOError(name_, ": asked bytes ", position, "+", n, ", got ", r->data->size());
    }
    return std::make_shared<FetchedBuffer>(std::move(r->data).value());
  }
  arrow::Result<std::int64_t> ReadAt(std::int64_t position, std::int64_t nbytes, void* out) override {
    ARROW_ASSIGN_OR_RAISE(auto buffer, ReadAt(position, nbytes));
    std::copy_n(buffer->data(), buffer->size(), static_cast<std::uint8_t*>(out));
    return buffer->size();
  }
  arrow::Result<std::int64_t> Read(std::int64_t nbytes, void* out) override {
    ARROW_ASSIGN_OR_RAISE(std::int64_t n, ReadAt(position_, nbytes, out));
    position_ += n;
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> Read(std::int64_t nbytes) override {
    ARROW_ASSIGN_OR_RAISE(auto buffer, ReadAt(position_, nbytes));
    position_ += buffer->size();
    return buffer;
  }

 private:
  storage::Fetcher& fetcher_;
  const storage::ObjectUri uri_;
  const std::string name_;
  const std::int64_t size_;
  std::int64_t position_ = 0;
  bool closed_ = false;
  std::mutex mu_;
};

}  // namespace

// The file `uri`, opened for Arrow: a local file, or a remote one whose size a 4-byte read learns.
Result<std::shared_ptr<arrow::io::RandomAccessFile>> open_arrow_file(const storage::ObjectUri& uri,
                                                                     const std::string& name,
                                                                     storage::Fetcher& fetcher) {
  if (uri.scheme == storage::Scheme::kFile) {
    auto file = arrow::io::ReadableFile::Open(uri.path);
    if (!file.ok()) return Error(ErrorCode::kNotFound, file.status().message(), name);
    return std::shared_ptr<arrow::io::RandomAccessFile>(*file);
  }
  if (!fetcher.submit({uri, 0, storage::ByteRange{0, 4}}))
    return Error(ErrorCode::kCancelled, "the fetcher closed", name);
  auto r = fetcher.next();
  if (!r) return Error(ErrorCode::kCancelled, "the fetcher closed", name);
  if (!r->data.ok()) return std::move(r->data).error();
  if (r->object_size == 0) {
    return Error(ErrorCode::kUnsupported, "the server did not declare the object's size (no Content-Range)", name);
  }
  return std::shared_ptr<arrow::io::RandomAccessFile>(
      std::make_shared<RemoteFile>(fetcher, uri, name, static_cast<std::int64_t>(r->object_size)));
}

}  // namespace mmfeed::dataset
