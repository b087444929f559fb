// MappedFile (mapped_file.h): mmap of the whole file, read-only.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

namespace mmfeed::core {

Result<MappedFile> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error(ErrorCode::kNotFound, std::string("cannot open it: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(ErrorCode::kNotFound, "not a file");
  }
  MappedFile m;
  m.size_ = static_cast<std::size_t>(st.st_size);
  m.inode_ = st.st_ino;
  m.device_ = st.st_dev;
  if (m.size_ > 0) {
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return Error(ErrorCode::kIoError, std::string("cannot map it: ") + std::strerror(e));
    }
    m.data_ = p;
  }
  ::close(fd);
  return m;
}

void MappedFile::advise_random() const {
  if (data_ != nullptr) ::madvise(data_, size_, MADV_RANDOM);  // advice only: a refusal changes nothing read
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      inode_(other.inode_),
      device_(other.device_) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    inode_ = other.inode_;
    device_ = other.device_;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

Status write_file_whole(const std::string& path, std::span<const std::byte> bytes) {
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return Error(ErrorCode::kIoError, "cannot write it", temporary);
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) return Error(ErrorCode::kIoError, "cannot move it into place: " + ec.message(), path);
  return ok_status();
}

}  // namespace mmfeed::core
