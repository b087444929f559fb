// Decoding to RGB as Pillow does: JPEG (libjpeg-turbo, also row by row for the streaming path),
// PNG (libspng), WebP (libwebp), EXIF orientation and alpha compositing. Over 400 lines because
// the three decoders share the size checks, the colour conversions and the orientation step that
// make their output Pillow's; each decoder alone is under 100 lines (format.* holds the headers).
#include "vision/decode.h"

#include <jpeglib.h>
#include <spng.h>
#include <turbojpeg.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <array>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vision/format.h"

namespace mmfeed::vision {

namespace {

using Bytes = std::span<const std::uint8_t>;

Error corrupt(std::string message) { return Error(ErrorCode::kCorruptData, std::move(message)); }

// ---- JPEG markers -------------------------------------------------------------------------

struct JpegMarkers {
  Bytes exif;  // TIFF block of the first APP1 "Exif\0\0"
};

// Walks the markers before the first scan.
JpegMarkers scan_jpeg_markers(Bytes b) {
  JpegMarkers out;
  std::size_t i = 2;
  while (i + 4 <= b.size()) {
    if (b[i] != 0xFF) break;
    const std::uint8_t marker = b[i + 1];
    if (marker == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) break;  // start of scan / end of image
    const std::size_t len = (static_cast<std::size_t>(b[i + 2]) << 8) | b[i + 3];
    if (len < 2 || i + 2 + len > b.size()) break;
    const std::uint8_t* payload = b.data() + i + 4;
    const std::size_t payload_len = len - 2;
    if (marker == 0xE1 && out.exif.empty() && payload_len >= 6 && std::memcmp(payload, "Exif\0\0", 6) == 0) {
      out.exif = Bytes(payload + 6, payload_len - 6);
    }
    i += 2 + len;
  }
  return out;
}

// ---- PNG ----------------------------------------------------------------------------------

struct SpngCtx {
  spng_ctx* ctx = spng_ctx_new(0);
  ~SpngCtx() { spng_ctx_free(ctx); }
};

struct PngHeader {
  spng_ihdr ihdr{};
  bool has_trns = false;
  spng_trns trns{};
  Bytes exif;
};

Result<PngHeader> png_header(spng_ctx* ctx, Bytes b) {
  spng_set_png_buffer(ctx, b.data(), b.size());
  spng_set_image_limits(ctx, 1u << 30, 1u << 30);
  PngHeader h;
  if (int rc = spng_get_ihdr(ctx, &h.ihdr); rc != 0) return corrupt(std::string("PNG header: ") + spng_strerror(rc));
  h.has_trns = spng_get_trns(ctx, &h.trns) == 0;
  return h;
}

// ---- WebP ---------------------------------------------------------------------------------

struct WebpHeader {
  WebPBitstreamFeatures features{};
  std::vector<std::uint8_t> exif;
};

Result<WebpHeader> webp_header(Bytes b) {
  WebpHeader h;
  if (WebPGetFeatures(b.data(), b.size(), &h.features) != VP8_STATUS_OK) return corrupt("WebP header is malformed");
  WebPData data{b.data(), b.size()};
  if (WebPDemuxer* demux = WebPDemux(&data)) {
    WebPChunkIterator it;
    if (WebPDemuxGetChunk(demux, "EXIF", 1, &it)) {
      h.exif.assign(it.chunk.bytes, it.chunk.bytes + it.chunk.size);
      WebPDemuxReleaseChunkIterator(&it);
    }
    WebPDemuxDelete(demux);
  }
  return h;
}

int orientation_of_exif_payload(Bytes exif) {
  // WebP and PNG EXIF payloads may carry the JPEG-style "Exif\0\0" prefix.
  if (exif.size() >= 6 && std::memcmp(exif.data(), "Exif\0\0", 6) == 0) exif = exif.subspan(6);
  return exif_orientation(exif);
}

Status check_size(Bytes b, const DecodeOptions& options) {
  if (b.size() <= options.max_bytes) return ok_status();
  return Error(ErrorCode::kResourceExhausted, "encoded image of " + std::to_string(b.size()) +
                                                  " bytes exceeds the limit of " + std::to_string(options.max_bytes));
}

// Pillow's CMYK -> RGB: each channel is (255 - k) - round(c * (255 - k) / 255).
std::uint8_t cmyk_channel(std::uint8_t c, std::uint8_t k) {
  const std::uint32_t nk = 255u - k;
  const std::uint32_t t = c * nk + 128u;
  const std::uint32_t mul = ((t >> 8) + t) >> 8;
  return static_cast<std::uint8_t>(nk - mul);
}

RgbImage allocate(int width, int height) {
  RgbImage img;
  img.width = width;
  img.height = height;
  img.pixels.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
  return img;
}

// RGBA (8 bits) to RGB by policy. `pillow_rgba_mode` is whether Pillow would open the image in
// mode "RGBA" (the only case qwen-vl-utils composites).
RgbImage rgba_to_rgb(const std::uint8_t* rgba, int width, int height, AlphaPolicy policy, bool pillow_rgba_mode) {
  RgbImage img = allocate(width, height);
  const std::size_t n = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  std::uint8_t* out = img.pixels.data();
  const bool paste = policy == AlphaPolicy::kPaste && pillow_rgba_mode;
  const bool composite = policy == AlphaPolicy::kComposite;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = rgba + i * 4;
    for (int c = 0; c < 3; ++c) {
      out[i * 3 + c] = paste ? paste_on_white(p[c], p[3]) : composite ? composite_on_white(p[c], p[3]) : p[c];
    }
  }
  return img;
}

Result<RgbImage> decode_jpeg(Bytes b, const DecodeOptions& options, int* orientation) {
  std::unique_ptr<void, decltype(&tjDestroy)> tj(tjInitDecompress(), &tjDestroy);
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.get(), b.data(), static_cast<unsigned long>(b.size()), &width, &height, &subsamp,
                          &colorspace) != 0) {
    return corrupt(std::string("JPEG header: ") + tjGetErrorStr2(tj.get()));
  }
  MMFEED_RETURN_IF_ERROR(check_image_size(width, height, options));
  *orientation = exif_orientation(scan_jpeg_markers(b).exif);
  if (options.jpeg_scale_denom > 1) {
    const tjscalingfactor factor{1, options.jpeg_scale_denom};
    width = TJSCALED(width, factor);
    height = TJSCALED(height, factor);
  }
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int pixel_format = cmyk ? TJPF_CMYK : colorspace == TJCS_GRAY ? TJPF_GRAY : TJPF_RGB;
  const int channels = tjPixelSize[pixel_format];
  core::ScratchVector<std::uint8_t> raw(static_cast<std::size_t>(width) * height * channels);
  // ISLOW DCT and fancy upsampling are TurboJPEG's defaults, as in Pillow. A warning (truncated
  // data) is an error: Pillow refuses truncated images too.
  if (tjDecompress2(tj.get(), b.data(), static_cast<unsigned long>(b.size()), raw.data(), width, 0, height,
                    pixel_format, TJFLAG_STOPONWARNING) != 0) {
    return corrupt("JPEG data of " + std::to_string(b.size()) +
                   " bytes is corrupt or truncated: " + tjGetErrorStr2(tj.get()));
  }
  if (pixel_format == TJPF_RGB) {
    RgbImage img;
    img.width = width;
    img.height = height;
    img.pixels = std::move(raw);
    return img;
  }
  RgbImage img = allocate(width, height);
  const std::size_t n = static_cast<std::size_t>(width) * height;
  if (pixel_format == TJPF_GRAY) {
    for (std::size_t i = 0; i < n; ++i) std::memset(&img.pixels[i * 3], raw[i], 3);
  } else {
    // Pillow reads CMYK JPEGs with Adobe's inverted polarity ("CMYK;I"), then converts.
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t* p = &raw[i * 4];
      const std::uint8_t k = 255 - p[3];
      for (int c = 0; c < 3; ++c) img.pixels[i * 3 + c] = cmyk_channel(255 - p[c], k);
    }
  }
  return img;
}

// libjpeg's error handling for decode_jpeg_rows: errors and warnings (TurboJPEG's
// TJFLAG_STOPONWARNING, as decode_jpeg uses it) jump back with the library's message.
struct JpegErrors {
  jpeg_error_mgr mgr{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] void jpeg_fail(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

void jpeg_warn(j_common_ptr info, int level) {
  if (level < 0) jpeg_fail(info);
}

// Everything the decoder touches between setjmp and a longjmp lives here, outside that frame.
struct JpegStream {
  jpeg_decompress_struct info{};
  JpegErrors errors;
  bool created = false;
  core::ScratchVector<std::uint8_t> rows;
  ~JpegStream() {
    if (created) jpeg_destroy_decompress(&info);
  }
};

// The one colour Pillow keeps as info["transparency"] through convert("RGB"), which HF's
// convert_to_rgb then turns white: a palette whose tRNS makes exactly one entry fully
// transparent and leaves the rest opaque (that entry's colour), an 8-bit-or-less gray value,
// or an 8-bit RGB colour. nullopt when there is none (or Pillow drops it).
std::optional<std::array<std::uint16_t, 3>> surviving_transparent_colour(spng_ctx* ctx, const PngHeader& h) {
  if (!h.has_trns || h.ihdr.bit_depth == 16) return std::nullopt;
  switch (h.ihdr.color_type) {
    case SPNG_COLOR_TYPE_INDEXED: {
      int zero_at = -1;
      for (std::uint32_t i = 0; i < h.trns.n_type3_entries; ++i) {
        const std::uint8_t a = h.trns.type3_alpha[i];
        if (a == 0 && zero_at < 0) {
          zero_at = static_cast<int>(i);
        } else if (a != 255) {
          return std::nullopt;  // a table of alphas: Pillow deletes it on convert("RGB")
        }
      }
      spng_plte plte{};
      if (zero_at < 0 || spng_get_plte(ctx, &plte) != 0 || static_cast<std::uint32_t>(zero_at) >= plte.n_entries) {
        return std::nullopt;
      }
      const spng_plte_entry& e = plte.entries[zero_at];
      return std::array<std::uint16_t, 3>{e.red, e.green, e.blue};
    }
    case SPNG_COLOR_TYPE_GRAYSCALE:
      if (h.ihdr.bit_depth == 1) return std::nullopt;  // Pillow mode "1": not carried over
      return std::array<std::uint16_t, 3>{h.trns.gray, h.trns.gray, h.trns.gray};
    case SPNG_COLOR_TYPE_TRUECOLOR: return std::array<std::uint16_t, 3>{h.trns.red, h.trns.green, h.trns.blue};
    default: return std::nullopt;
  }
}

Result<RgbImage> decode_png(Bytes b, const DecodeOptions& options, int* orientation) {
  SpngCtx ctx;
  MMFEED_ASSIGN_OR_RETURN(PngHeader h, png_header(ctx.ctx, b));
  const int width = static_cast<int>(h.ihdr.width);
  const int height = static_cast<int>(h.ihdr.height);
  MMFEED_RETURN_IF_ERROR(check_image_size(width, height, options));
  const int type = h.ihdr.color_type;
  const int depth = h.ihdr.bit_depth;
  const std::size_t n = static_cast<std::size_t>(width) * height;
  auto decode = [&](int fmt, int flags, core::ScratchVector<std::uint8_t>& out) -> Status {
    std::size_t size = 0;
    if (int rc = spng_decoded_image_size(ctx.ctx, fmt, &size); rc != 0)
      return corrupt(std::string("PNG: ") + spng_strerror(rc));
    out.resize(size);
    if (int rc = spng_decode_image(ctx.ctx, out.data(), size, fmt, flags); rc != 0) {
      return corrupt("PNG data of " + std::to_string(b.size()) +
                     " bytes is corrupt or truncated: " + spng_strerror(rc));
    }
    return ok_status();
  };
  core::ScratchVector<std::uint8_t> raw;
  RgbImage img;
  const bool has_alpha =
      type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA || type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA || h.has_trns;
  if (depth == 16) {
    // 16-bit samples, host-endian. Pillow: gray opens as I;16 and converts to RGB by clipping
    // at 255; RGB, RGBA and LA keep the high byte.
    MMFEED_RETURN_IF_ERROR(decode(SPNG_FMT_PNG, 0, raw));
    const auto* s = reinterpret_cast<const std::uint16_t*>(raw.data());
    const int channels = type == SPNG_COLOR_TYPE_GRAYSCALE         ? 1
                         : type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 2
                         : type == SPNG_COLOR_TYPE_TRUECOLOR       ? 3
                                                                   : 4;
    if (channels == 1) {
      img = allocate(width, height);
      for (std::size_t i = 0; i < n; ++i) std::memset(&img.pixels[i * 3], std::min<std::uint16_t>(s[i], 255), 3);
    } else {
      core::ScratchVector<std::uint8_t> rgba(n * 4);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t* p = s + i * channels;
        const std::uint8_t g = static_cast<std::uint8_t>(p[0] >> 8);
        rgba[i * 4 + 0] = g;
        rgba[i * 4 + 1] = channels >= 3 ? static_cast<std::uint8_t>(p[1] >> 8) : g;
        rgba[i * 4 + 2] = channels >= 3 ? static_cast<std::uint8_t>(p[2] >> 8) : g;
        rgba[i * 4 + 3] = channels == 2   ? static_cast<std::uint8_t>(p[1] >> 8)
                          : channels == 4 ? static_cast<std::uint8_t>(p[3] >> 8)
                                          : 255;
      }
      img = rgba_to_rgb(rgba.data(), width, height, options.alpha, type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA);
    }
  } else if (has_alpha && options.alpha != AlphaPolicy::kDrop) {
    MMFEED_RETURN_IF_ERROR(decode(SPNG_FMT_RGBA8, SPNG_DECODE_TRNS, raw));
    img = rgba_to_rgb(raw.data(), width, height, options.alpha, type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA);
  } else if (type == SPNG_COLOR_TYPE_GRAYSCALE) {
    MMFEED_RETURN_IF_ERROR(decode(SPNG_FMT_G8, 0, raw));
    img = allocate(width, height);
    for (std::size_t i = 0; i < n; ++i) std::memset(&img.pixels[i * 3], raw[i], 3);
  } else if (type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA) {  // libspng has no GA8 output for 8-bit input
    MMFEED_RETURN_IF_ERROR(decode(SPNG_FMT_RGBA8, 0, raw));
    img = rgba_to_rgb(raw.data(), width, height, AlphaPolicy::kDrop, false);
  } else {
    MMFEED_RETURN_IF_ERROR(decode(SPNG_FMT_RGB8, 0, raw));
    img.width = width;
    img.height = height;
    img.pixels = std::move(raw);
  }
  if (options.alpha != AlphaPolicy::kComposite) {
    if (const auto colour = surviving_transparent_colour(ctx.ctx, h)) {
      std::uint8_t* p = img.pixels.data();
      for (std::size_t i = 0; i < n; ++i, p += 3) {
        if (p[0] == (*colour)[0] && p[1] == (*colour)[1] && p[2] == (*colour)[2]) std::memset(p, 255, 3);
      }
    }
  }
  spng_exif exif{};
  if (spng_get_exif(ctx.ctx, &exif) == 0) {
    *orientation = orientation_of_exif_payload(Bytes(reinterpret_cast<const std::uint8_t*>(exif.data), exif.length));
  }
  return img;
}

Result<RgbImage> decode_webp(Bytes b, const DecodeOptions& options, int* orientation) {
  MMFEED_ASSIGN_OR_RETURN(WebpHeader h, webp_header(b));
  *orientation = orientation_of_exif_payload(h.exif);
  MMFEED_RETURN_IF_ERROR(check_image_size(h.features.width, h.features.height, options));
  const int width = h.features.width;
  const int height = h.features.height;
  if (h.features.has_animation) {
    // The first frame, composed on the canvas as an animation decoder shows it.
    WebPAnimDecoderOptions anim_options;
    WebPAnimDecoderOptionsInit(&anim_options);
    anim_options.color_mode = MODE_RGBA;
    WebPData data{b.data(), b.size()};
    std::unique_ptr<WebPAnimDecoder, decltype(&WebPAnimDecoderDelete)> dec(WebPAnimDecoderNew(&data, &anim_options),
                                                                           &WebPAnimDecoderDelete);
    WebPAnimInfo info;
    std::uint8_t* frame = nullptr;
    int timestamp = 0;
    if (!dec || !WebPAnimDecoderGetInfo(dec.get(), &info) || !WebPAnimDecoderGetNext(dec.get(), &frame, &timestamp)) {
      return corrupt("WebP animation: cannot decode the first frame");
    }
    MMFEED_RETURN_IF_ERROR(
        check_image_size(static_cast<int>(info.canvas_width), static_cast<int>(info.canvas_height), options));
    return rgba_to_rgb(frame, static_cast<int>(info.canvas_width), static_cast<int>(info.canvas_height), options.alpha,
                       true);
  }
  if (h.features.has_alpha && options.alpha != AlphaPolicy::kDrop) {
    core::ScratchVector<std::uint8_t> rgba(static_cast<std::size_t>(width) * height * 4);
    if (WebPDecodeRGBAInto(b.data(), b.size(), rgba.data(), rgba.size(), width * 4) == nullptr) {
      return corrupt("WebP data of " + std::to_string(b.size()) + " bytes is corrupt or truncated");
    }
    return rgba_to_rgb(rgba.data(), width, height, options.alpha, true);
  }
  RgbImage img = allocate(width, height);
  if (WebPDecodeRGBInto(b.data(), b.size(), img.pixels.data(), img.pixels.size(), width * 3) == nullptr) {
    return corrupt("WebP data of " + std::to_string(b.size()) + " bytes is corrupt or truncated");
  }
  return img;
}

}  // namespace

Status check_image_size(int width, int height, const DecodeOptions& options) {
  if (width <= 0 || height <= 0) {
    return corrupt("header declares no pixels (" + std::to_string(width) + "x" + std::to_string(height) +
                   "): truncated or corrupt");
  }
  const std::uint64_t pixels = static_cast<std::uint64_t>(width) * static_cast<std::uint64_t>(height);
  if (pixels > options.max_pixels) {
    return Error(ErrorCode::kResourceExhausted, "image of " + std::to_string(width) + "x" + std::to_string(height) +
                                                    " = " + std::to_string(pixels) + " pixels exceeds the limit of " +
                                                    std::to_string(options.max_pixels) + " (decompression bomb?)");
  }
  return ok_status();
}

int exif_orientation(std::span<const std::uint8_t> t) {
  if (t.size() < 8) return 1;
  bool little;
  if (t[0] == 'I' && t[1] == 'I' && t[2] == 42 && t[3] == 0) {
    little = true;
  } else if (t[0] == 'M' && t[1] == 'M' && t[2] == 0 && t[3] == 42) {
    little = false;
  } else {
    return 1;
  }
  const std::uint32_t ifd = read32(t.data() + 4, little);
  if (ifd > t.size() || t.size() - ifd < 2) return 1;
  const std::uint32_t count = read16(t.data() + ifd, little);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::size_t entry = ifd + 2 + static_cast<std::size_t>(i) * 12;
    if (entry + 12 > t.size()) return 1;
    if (read16(t.data() + entry, little) != 0x0112) continue;
    const std::uint32_t type = read16(t.data() + entry + 2, little);
    const std::uint32_t value = type == 3   ? read16(t.data() + entry + 8, little)
                                : type == 4 ? read32(t.data() + entry + 8, little)
                                            : 0;
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

std::uint8_t paste_on_white(std::uint8_t c, std::uint8_t a) {
  // Image.paste(im, mask=alpha) onto white: DIV255(255 * (255 - a) + c * a), rounded as Pillow.
  const std::uint32_t t = 255u * (255u - a) + static_cast<std::uint32_t>(c) * a + 128u;
  return static_cast<std::uint8_t>(((t >> 8) + t) >> 8);
}

std::uint8_t composite_on_white(std::uint8_t c, std::uint8_t a) {
  // Image.alpha_composite(white, im): Pillow's integer path with 7 extra bits of precision.
  if (a == 0) return 255;
  constexpr std::uint32_t kShift = 7;
  const std::uint32_t outa255 = a * 255u + 255u * (255u - a);
  const std::uint32_t coef1 = a * 255u * 255u * (1u << kShift) / outa255;
  const std::uint32_t coef2 = 255u * (1u << kShift) - coef1;
  const std::uint32_t t = c * coef1 + 255u * coef2 + (0x80u << kShift);
  return static_cast<std::uint8_t>((((t >> 8) + t) >> 8) >> kShift);
}

RgbImage rgb_from_pixels(const std::uint8_t* pixels, int width, int height, int channels, AlphaPolicy alpha) {
  if (channels == 4) return rgba_to_rgb(pixels, width, height, alpha, true);
  RgbImage img = allocate(width, height);
  const std::size_t n = static_cast<std::size_t>(width) * height;
  if (channels == 3) {
    std::memcpy(img.pixels.data(), pixels, n * 3);
  } else {
    for (std::size_t i = 0; i < n; ++i) std::memset(&img.pixels[i * 3], pixels[i * channels], 3);
  }
  return img;
}

RgbImage apply_orientation(RgbImage in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int w = in.width, h = in.height;
  const bool swap = orientation >= 5;
  RgbImage out = allocate(swap ? h : w, swap ? w : h);
  const std::uint8_t* src = in.pixels.data();
  std::uint8_t* dst = out.pixels.data();
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;
      switch (orientation) {
        case 2: sx = w - 1 - x; break;                  // FLIP_LEFT_RIGHT
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;  // ROTATE_180
        case 4: sy = h - 1 - y; break;                  // FLIP_TOP_BOTTOM
        case 5: sx = y, sy = x; break;                  // TRANSPOSE
        case 6: sx = y, sy = h - 1 - x; break;          // ROTATE_270
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;  // TRANSVERSE
        case 8: sx = w - 1 - y, sy = x; break;          // ROTATE_90
      }
      std::memcpy(dst + (static_cast<std::size_t>(y) * out.width + x) * 3,
                  src + (static_cast<std::size_t>(sy) * w + sx) * 3, 3);
    }
  }
  return out;
}

Result<ImageInfo> probe(std::span<const std::uint8_t> b) {
  MMFEED_ASSIGN_OR_RETURN(const ImageFormat format, format_of(b));
  ImageInfo info;
  info.format = format;
  switch (format) {
    case ImageFormat::kJpeg: {
      std::unique_ptr<void, decltype(&tjDestroy)> tj(tjInitDecompress(), &tjDestroy);
      int subsamp = 0, colorspace = 0;
      if (tjDecompressHeader3(tj.get(), b.data(), static_cast<unsigned long>(b.size()), &info.width, &info.height,
                              &subsamp, &colorspace) != 0) {
        return corrupt(std::string("JPEG header: ") + tjGetErrorStr2(tj.get()));
      }
      info.orientation = exif_orientation(scan_jpeg_markers(b).exif);
      break;
    }
    case ImageFormat::kPng: {
      SpngCtx ctx;
      MMFEED_ASSIGN_OR_RETURN(PngHeader h, png_header(ctx.ctx, b));
      info.width = static_cast<int>(h.ihdr.width);
      info.height = static_cast<int>(h.ihdr.height);
      info.has_alpha = h.ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ||
                       h.ihdr.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA || h.has_trns;
      spng_exif exif{};
      if (spng_get_exif(ctx.ctx, &exif) == 0) {
        info.orientation =
            orientation_of_exif_payload(Bytes(reinterpret_cast<const std::uint8_t*>(exif.data), exif.length));
      }
      break;
    }
    case ImageFormat::kWebp: {
      MMFEED_ASSIGN_OR_RETURN(WebpHeader h, webp_header(b));
      info.width = h.features.width;
      info.height = h.features.height;
      info.has_alpha = h.features.has_alpha;
      info.animated = h.features.has_animation;
      info.orientation = orientation_of_exif_payload(h.exif);
      break;
    }
  }
  if (info.width <= 0 || info.height <= 0) {  // libjpeg-turbo reads a header cut short as 0x0
    return corrupt(std::string(format_name(info.format)) + " data of " + std::to_string(b.size()) +
                   " bytes is corrupt or truncated: its header declares no pixels (" + std::to_string(info.width) +
                   "x" + std::to_string(info.height) + ")");
  }
  return info;
}

Result<RgbImage> decode_rgb(std::span<const std::uint8_t> b, const DecodeOptions& options) {
  MMFEED_RETURN_IF_ERROR(check_size(b, options));
  MMFEED_ASSIGN_OR_RETURN(const ImageFormat format, format_of(b));
  int orientation = 1;
  Result<RgbImage> img = Error(ErrorCode::kInternal, "unreachable");
  switch (format) {
    case ImageFormat::kJpeg: img = decode_jpeg(b, options, &orientation); break;
    case ImageFormat::kPng: img = decode_png(b, options, &orientation); break;
    case ImageFormat::kWebp: img = decode_webp(b, options, &orientation); break;
  }
  if (!img.ok() || options.exif == ExifPolicy::kIgnore || orientation == 1) return img;
  return apply_orientation(std::move(img).value(), orientation);
}

Result<bool> decode_jpeg_rows(std::span<const std::uint8_t> bytes, const DecodeOptions& options, int width, int height,
                              int first_row, int chunk_rows, const RowSink& sink) {
  MMFEED_RETURN_IF_ERROR(check_size(bytes, options));
  auto stream = std::make_unique<JpegStream>();
  jpeg_decompress_struct& info = stream->info;
  info.err = jpeg_std_error(&stream->errors.mgr);
  stream->errors.mgr.error_exit = jpeg_fail;
  stream->errors.mgr.emit_message = jpeg_warn;
  if (setjmp(stream->errors.jump) != 0) {
    return corrupt("JPEG data of " + std::to_string(bytes.size()) +
                   " bytes is corrupt or truncated: " + stream->errors.message);
  }
  jpeg_create_decompress(&info);
  stream->created = true;
  jpeg_mem_src(&info, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  MMFEED_RETURN_IF_ERROR(
      check_image_size(static_cast<int>(info.image_width), static_cast<int>(info.image_height), options));
  if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) return false;
  // TurboJPEG's defaults, which decode_jpeg (and Pillow) decode with: ISLOW DCT, fancy upsampling.
  info.out_color_space = JCS_RGB;
  info.dct_method = JDCT_ISLOW;
  info.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&info);
  if (static_cast<int>(info.output_width) != width || static_cast<int>(info.output_height) != height) {
    return corrupt("JPEG decodes to " + std::to_string(info.output_width) + "x" + std::to_string(info.output_height) +
                   ", its header was read as " + std::to_string(width) + "x" + std::to_string(height));
  }
  const std::size_t stride = static_cast<std::size_t>(width) * 3;
  stream->rows.resize(stride * static_cast<std::size_t>(chunk_rows));
  int chunk_start = 0;  // the image row the chunk buffer's first row holds
  int held = 0;
  while (static_cast<int>(info.output_scanline) < height) {
    const int y = static_cast<int>(info.output_scanline);
    if (y < first_row) {
      // Rows the caller does not want: decoded into the buffer and overwritten.
      JSAMPROW row = stream->rows.data();
      jpeg_read_scanlines(&info, &row, 1);
      continue;
    }
    if (held == 0) chunk_start = y;
    JSAMPROW row[4];
    const int room = std::min(chunk_rows - held, 4);
    for (int i = 0; i < room; ++i) row[i] = stream->rows.data() + (held + i) * stride;
    held += static_cast<int>(jpeg_read_scanlines(&info, row, static_cast<JDIMENSION>(room)));
    if (held == chunk_rows || static_cast<int>(info.output_scanline) == height) {
      sink(stream->rows.data(), chunk_start, held);
      held = 0;
    }
  }
  jpeg_finish_decompress(&info);
  return true;
}

}  // namespace mmfeed::vision
