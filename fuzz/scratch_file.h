// A fuzz target's input written to a file of its own (one per process), removed at exit so that
// long fuzz runs and the replay tests leave nothing in /tmp.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace mmfeed::fuzz {

class ScratchFile {
 public:
  explicit ScratchFile(const std::string& suffix) : path_("/tmp/mmfeed-fuzz-" + std::to_string(::getpid()) + suffix) {}
  ~ScratchFile() { ::unlink(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's contents with the input; returns its path.
  const std::string& write(const std::uint8_t* data, std::size_t size) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace mmfeed::fuzz
