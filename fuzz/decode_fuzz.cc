// Fuzz target: the image probe and decoders under every policy, and the streaming JPEG decoder.
// Invariants checked: a successful decode holds exactly width * height * 3 bytes and agrees
// with the probe; the streamed rows arrive in order, cover the image and equal the whole
// decode's (ignoring EXIF orientation), and streaming succeeds exactly when the whole decode does.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "vision/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::vision;
  const std::span<const std::uint8_t> bytes(data, size);
  const auto info = probe(bytes);
  for (AlphaPolicy alpha : {AlphaPolicy::kDrop, AlphaPolicy::kPaste, AlphaPolicy::kComposite}) {
    DecodeOptions options;
    options.alpha = alpha;
    options.max_pixels = 1u << 22;  // keep each input cheap
    const auto img = decode_rgb(bytes, options);
    if (!img.ok()) continue;
    if (img->pixels.size() != static_cast<std::size_t>(img->width) * img->height * 3) std::abort();
    if (!info.ok() ||
        (!info->animated && (img->width != info->upright_width() || img->height != info->upright_height()))) {
      std::abort();
    }
  }
  if (info.ok() && info->format == ImageFormat::kJpeg) {
    DecodeOptions options;
    options.exif = ExifPolicy::kIgnore;
    options.max_pixels = 1u << 22;
    const auto whole = decode_rgb(bytes, options);
    int next = 0;
    bool same = true;
    const auto streamed =
        decode_jpeg_rows(bytes, options, info->width, info->height, 0, 20, [&](const std::uint8_t* rows, int y, int n) {
          if (y != next || n < 1 || n > 20) std::abort();
          next = y + n;
          if (!whole.ok()) return;  // then the stream must fail later (checked below)
          const std::size_t stride = static_cast<std::size_t>(whole->width) * 3;
          same = same && std::memcmp(rows, whole->pixels.data() + y * stride, n * stride) == 0;
        });
    if (streamed.ok() && *streamed && (!whole.ok() || next != whole->height || !same)) std::abort();
    if (!streamed.ok() && whole.ok()) std::abort();
  }
  return 0;
}
