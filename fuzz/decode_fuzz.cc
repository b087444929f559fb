// Fuzz target: the image probe and decoders under every policy. Invariants checked: a
// successful decode holds exactly width * height * 3 bytes and agrees with the probe.
#include <cstdint>
#include <cstdlib>
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
    if (!info.ok() || (!info->animated && (img->width != info->upright_width() || img->height != info->upright_height()))) {
      std::abort();
    }
  }
  return 0;
}
