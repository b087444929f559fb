// A file mapped read-only: nothing of it is read until touched, and the pages it shares with
// every other process mapping the same file are held once by the node (the dataset index that
// eight ranks open; a medium whose header alone is read).
//
// A mapped file must not be cut while mapped (touching a page past its new end raises SIGBUS):
// mmfeed replaces the files it maps by renaming a new one into place, never rewriting them.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(core::MappedFile f, core::MappedFile::open("train.jsonl.mmidx"));
//   std::span<const std::byte> bytes = f.bytes();
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "mmfeed/error.h"

namespace mmfeed::core {

class MappedFile {
 public:
  // kNotFound when `path` cannot be opened or is no regular file (naming nothing: the caller
  // names it), kIoError when it cannot be mapped.
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  std::size_t size() const { return size_; }
  // Tells the kernel that the pages are read in no order (a dataset index, a rank's samples drawn
  // across it): a page touched is read alone, without the readahead that would read the file whole.
  void advise_random() const;
  // The open file's identity when mapped: its device and inode (what a path renamed over since no
  // longer names).
  unsigned long long inode() const { return inode_; }
  unsigned long long device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
  unsigned long long inode_ = 0, device_ = 0;
};

// `bytes` written to the file at `path` whole: into `path` + ".partial" first, then renamed into
// place, so no reader (no mapping) ever meets half of it. An error names the file.
Status write_file_whole(const std::string& path, std::span<const std::byte> bytes);

}  // namespace mmfeed::core
