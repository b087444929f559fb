#include "vision/format.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace mmfeed::vision {

std::string_view format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kWebp: return "WebP";
  }
  return "?";
}

namespace {

using Bytes = std::span<const std::uint8_t>;

Error corrupt(std::string message) { return Error(ErrorCode::kCorruptData, std::move(message)); }

std::optional<ImageFormat> sniff(Bytes b) {
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::kJpeg;
  static constexpr std::uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) return ImageFormat::kPng;
  if (b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 && std::memcmp(b.data() + 8, "WEBP", 4) == 0) {
    return ImageFormat::kWebp;
  }
  return std::nullopt;
}

bool starts_with(Bytes b, std::string_view prefix) {
  return b.size() >= prefix.size() && std::memcmp(b.data(), prefix.data(), prefix.size()) == 0;
}

// An SVG document: its first element, after an optional byte-order mark, XML declaration,
// comments and DOCTYPE, is <svg>. Only the first 4 KiB are looked at.
bool is_svg(Bytes b) {
  std::string_view s(reinterpret_cast<const char*>(b.data()), std::min<std::size_t>(b.size(), 4096));
  if (s.starts_with("\xEF\xBB\xBF")) s.remove_prefix(3);
  while (true) {
    const std::size_t start = s.find_first_not_of(" \t\r\n");
    if (start == std::string_view::npos) return false;
    s.remove_prefix(start);
    std::string_view close;
    if (s.starts_with("<?")) {
      close = "?>";
    } else if (s.starts_with("<!--")) {
      close = "-->";
    } else if (s.starts_with("<!")) {
      close = ">";
    } else {
      break;
    }
    const std::size_t end = s.find(close);
    if (end == std::string_view::npos) return false;
    s.remove_prefix(end + close.size());
  }
  if (!s.starts_with("<svg")) return false;
  return s.size() == 4 || std::string_view(" \t\r\n>/").find(s[4]) != std::string_view::npos;
}

// The ISO-BMFF image formats by the brands of the leading `ftyp` box; nullopt for any other
// brand (MP4 and QuickTime video among them).
std::optional<std::string_view> heif_family(Bytes b) {
  if (b.size() < 16 || std::memcmp(b.data() + 4, "ftyp", 4) != 0) return std::nullopt;
  const std::size_t box_end = std::min<std::size_t>(b.size(), read32(b.data(), false));
  // The major brand, then (past the minor version) the compatible brands.
  std::vector<std::string_view> brands{std::string_view(reinterpret_cast<const char*>(b.data() + 8), 4)};
  for (std::size_t at = 16; at + 4 <= box_end; at += 4) {
    brands.emplace_back(reinterpret_cast<const char*>(b.data() + at), 4);
  }
  auto any = [&](std::initializer_list<std::string_view> wanted) {
    return std::any_of(brands.begin(), brands.end(), [&](std::string_view brand) {
      return std::find(wanted.begin(), wanted.end(), brand) != wanted.end();
    });
  };
  if (any({"avif", "avis"})) return "AVIF image";
  if (any({"heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs"})) return "HEIC image";
  if (any({"mif1", "msf1"})) return "HEIF image";
  return std::nullopt;
}

// Formats recognised by their signature but not decoded, named so that the message says what
// the data is. nullopt for data of no format known here.
std::optional<std::string_view> unsupported_format(Bytes b) {
  if (starts_with(b, "GIF87a") || starts_with(b, "GIF89a")) return "GIF image";
  if (starts_with(b, std::string_view("II*\0", 4))) return "TIFF image (little-endian)";
  if (starts_with(b, std::string_view("MM\0*", 4))) return "TIFF image (big-endian)";
  // "BM" alone is too weak: the DIB header that follows the 14-byte file header has one of
  // the sizes the BMP versions define.
  if (starts_with(b, "BM") && b.size() >= 18) {
    const std::uint32_t dib = read32(b.data() + 14, true);
    for (std::uint32_t size : {12u, 40u, 52u, 56u, 64u, 108u, 124u}) {
      if (dib == size) return "BMP image";
    }
  }
  if (const auto heif = heif_family(b)) return heif;
  if (is_svg(b)) return "SVG image";
  // ICO: reserved 0, type 1, at least one image, the first directory entry's reserved byte 0.
  if (b.size() >= 22 && starts_with(b, std::string_view("\0\0\1\0", 4)) && read16(b.data() + 4, true) != 0 &&
      b[9] == 0) {
    return "ICO image";
  }
  if (starts_with(b, "\xFF\x0A") || starts_with(b, std::string_view("\0\0\0\x0CJXL \r\n\x87\n", 12))) {
    return "JPEG XL image";
  }
  if (starts_with(b, "%PDF-")) return "PDF document";
  return std::nullopt;
}

}  // namespace

Result<ImageFormat> format_of(std::span<const std::uint8_t> b) {
  if (b.empty()) return corrupt("empty image (0 bytes)");
  if (const auto format = sniff(b)) return *format;
  if (const auto name = unsupported_format(b)) {
    return Error(ErrorCode::kUnsupported, std::string(*name) +
                                              ": format not supported (mmfeed decodes JPEG, PNG and WebP); convert "
                                              "it to one of those");
  }
  // Its bytes are not shown: the "image" may be any file a manifest names (a key, a token).
  return corrupt("not a JPEG, PNG or WebP image: unrecognised signature (" + std::to_string(b.size()) + " bytes)");
}

}  // namespace mmfeed::vision
