// Image decoding to 8-bit RGB exactly as Pillow does it, so that what follows (resize,
// normalize) sees the same pixels as the Hugging Face processor.
//
// JPEG via libjpeg-turbo (ISLOW DCT, fancy upsampling: Pillow's settings; grayscale replicated;
// CMYK/YCCK converted with Pillow's formula, Adobe-inverted data un-inverted as Pillow does),
// PNG via libspng (1-16 bit, gray, gray+alpha, palette, tRNS, RGB(A); 16-bit samples reduced
// as Pillow's modes do: I;16 gray clipped at 255, RGB(A) 16-bit to their high byte), WebP via
// libwebp (lossy, lossless, alpha; the first frame of an animation).
//
// Policies, explicit because the references differ:
//   ExifPolicy::kApply     rotate/flip by the EXIF orientation (HF's path/URL route:
//                          load_image applies ImageOps.exif_transpose) - the default;
//   ExifPolicy::kIgnore    leave pixels as stored (a PIL image handed to HF directly).
//   AlphaPolicy::kDrop     convert("RGB"): alpha discarded (HF's path/URL route) - the default.
//                          As in HF, a single transparent colour that Pillow keeps through
//                          convert("RGB") (PNG tRNS: one fully transparent palette entry, a
//                          gray value, an RGB colour) still reaches HF's convert_to_rgb, which
//                          composites it: pixels of that colour become white;
//   AlphaPolicy::kPaste    qwen-vl-utils: an RGBA image pasted on white through its alpha;
//   AlphaPolicy::kComposite  HF given a PIL image: anything with alpha or transparency is
//                          Image.alpha_composite'd over opaque white.
// Limits are checked from the header, before any pixel memory is allocated.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(ImageInfo info, probe(bytes));      // format, size: no decode
//   MMFEED_ASSIGN_OR_RETURN(RgbImage img, decode_rgb(bytes, {}));
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "core/scratch.h"
#include "mmfeed/choices.h"
#include "mmfeed/error.h"

namespace mmfeed::vision {

enum class ImageFormat { kJpeg, kPng, kWebp };
std::string_view format_name(ImageFormat format);

enum class ExifPolicy { kApply, kIgnore };
using ::mmfeed::AlphaPolicy;  // (mmfeed/choices.h)

struct ImageInfo {
  ImageFormat format = ImageFormat::kJpeg;
  int width = 0;  // as stored
  int height = 0;
  int orientation = 1;     // EXIF orientation 1-8 (1 when absent)
  bool has_alpha = false;  // an alpha channel or transparency information
  bool animated = false;

  // Size after the EXIF orientation is applied (orientations 5-8 swap the sides).
  int upright_width() const { return orientation >= 5 ? height : width; }
  int upright_height() const { return orientation >= 5 ? width : height; }
};

struct DecodeOptions {
  ExifPolicy exif = ExifPolicy::kApply;
  AlphaPolicy alpha = AlphaPolicy::kDrop;
  std::uint64_t max_pixels = 178'956'970;  // Pillow's decompression-bomb error threshold
  std::size_t max_bytes = 512u << 20;      // largest encoded input accepted
  // Approximate, opt-in: decode JPEGs at 1/2, 1/4 or 1/8 size in the DCT domain (libjpeg-turbo's
  // scaled IDCT). 1 decodes exactly.
  int jpeg_scale_denom = 1;
};

struct RgbImage {
  int width = 0;
  int height = 0;
  core::ScratchVector<std::uint8_t> pixels;  // height rows of width * 3 bytes, RGB
};

// Reads only the headers (and the EXIF orientation). kCorruptData for broken headers, naming
// what was wrong, and for data of no known format (its size in the message, never its bytes).
// kUnsupported, naming the format, for what is recognised by its signature but
// not decoded: GIF, TIFF, BMP, HEIC/HEIF/AVIF, SVG, ICO, JPEG XL images and PDF documents
// ("GIF image: format not supported (mmfeed decodes JPEG, PNG and WebP); convert it to one of
// those").
Result<ImageInfo> probe(std::span<const std::uint8_t> bytes);

// Whether a header's `width` x `height` may be decoded under `options`: kCorruptData for no
// pixels, kResourceExhausted for more than options.max_pixels (a decompression bomb), before any
// pixel memory is taken. The decoders check it; so does a plan made from a header alone.
Status check_image_size(int width, int height, const DecodeOptions& options);

// The pixels, with the errors of probe() and those of the data after the header.
Result<RgbImage> decode_rgb(std::span<const std::uint8_t> bytes, const DecodeOptions& options = {});

// A JPEG decoded as a stream of RGB rows, top to bottom, exactly the rows decode_rgb gives
// (the same libjpeg-turbo settings; no EXIF orientation, no DCT scaling), `chunk_rows` at a
// time from row `first_row` on: sink(rows, y, n) receives rows y .. y + n - 1 (n <= chunk_rows,
// chunk_rows * width * 3 bytes of working memory instead of the whole image). Rows above
// first_row are decoded and dropped; the data is read to its end, so that a truncated or
// corrupt file fails as in decode_rgb. Returns false, before decoding anything, for what has
// no direct RGB output (CMYK, YCCK: decode_rgb converts those). `width` x `height` is the size
// the caller planned for (probe()'s): a header that says otherwise is kCorruptData.
using RowSink = std::function<void(const std::uint8_t* rows, int y, int n)>;
Result<bool> decode_jpeg_rows(std::span<const std::uint8_t> bytes, const DecodeOptions& options, int width, int height,
                              int first_row, int chunk_rows, const RowSink& sink);

// RGB from raw pixels (channels 1: gray, 3: RGB, 4: RGBA by `alpha`), as HF treats arrays.
RgbImage rgb_from_pixels(const std::uint8_t* pixels, int width, int height, int channels, AlphaPolicy alpha);

// The EXIF orientation in a TIFF-structured EXIF block (starting at "II*\0" or "MM\0*"); 1
// when absent or malformed.
int exif_orientation(std::span<const std::uint8_t> tiff);

// Applies EXIF orientation `orientation` (2-8) to an RGB image, as ImageOps.exif_transpose.
RgbImage apply_orientation(RgbImage image, int orientation);

// Alpha handling on one RGBA pixel row segment, bit-exact with Pillow: `paste_on_white`
// (Image.paste with an L mask) and `composite_on_white` (Image.alpha_composite over white).
std::uint8_t paste_on_white(std::uint8_t c, std::uint8_t a);
std::uint8_t composite_on_white(std::uint8_t c, std::uint8_t a);

}  // namespace mmfeed::vision
