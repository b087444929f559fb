// What image data is, from its first bytes: JPEG, PNG or WebP (decoded), a format mmfeed
// recognises but does not decode (GIF, TIFF, BMP, HEIC/HEIF/AVIF, SVG, ICO, JPEG XL, PDF: named
// in a kUnsupported error that says to convert it), or unknown (kCorruptData, giving its size but
// never its bytes: the "image" may be any file a manifest names, a key or a token).
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(ImageFormat f, format_of(bytes));
#pragma once

#include <cstdint>
#include <span>

#include "mmfeed/error.h"
#include "vision/decode.h"

namespace mmfeed::vision {

Result<ImageFormat> format_of(std::span<const std::uint8_t> bytes);

// 16- and 32-bit unsigned integers at `p` in either byte order (TIFF/EXIF, BMP, ISO-BMFF).
inline std::uint32_t read16(const std::uint8_t* p, bool little) {
  return little ? p[0] | (p[1] << 8) : (p[0] << 8) | p[1];
}
inline std::uint32_t read32(const std::uint8_t* p, bool little) {
  return little ? p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<std::uint32_t>(p[3]) << 24)
                : (static_cast<std::uint32_t>(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
}

}  // namespace mmfeed::vision
