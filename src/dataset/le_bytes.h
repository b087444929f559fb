// The little-endian integers and CRC-32s of the files mmfeed writes (the dataset index, its
// build's journal, a Parquet file's index), in one place.
//
// Example:
//   std::string out;
//   put_le(out, samples, 8);
//   std::uint64_t back = get_le(bytes + 16, 8);
//   std::uint32_t crc = crc32_of(out.data(), out.size());
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace mmfeed::dataset {

// `v`'s low `bytes` bytes appended to `out`, least significant first.
inline void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The `bytes`-byte little-endian integer at `in`.
inline std::uint64_t get_le(const std::byte* in, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return v;
}

inline std::uint32_t crc32_of(const void* data, std::size_t size) {
  return static_cast<std::uint32_t>(crc32_z(0, static_cast<const Bytef*>(data), size));
}

}  // namespace mmfeed::dataset
