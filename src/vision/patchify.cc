#include "vision/patchify.h"

#include <cstring>

namespace mmfeed::vision {

NormalizeTable::NormalizeTable(const ModelProfile& p) {
  const double rescale = 1.0 / 255.0;
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) {
      // volatile keeps each step a float32 operation, as numpy does it.
      volatile float x = static_cast<float>(static_cast<double>(v) * rescale);
      volatile float centred = x - p.mean[c];
      value[c][v] = centred / p.std[c];
    }
  }
}

int element_size(OutputType type) {
  switch (type) {
    case OutputType::kFloat32: return 4;
    case OutputType::kBFloat16: return 2;
    case OutputType::kUInt8: return 1;
  }
  return 4;
}

int row_elements(const ModelProfile& p, OutputType type) {
  return type == OutputType::kUInt8 ? 3 * p.patch_size * p.patch_size : p.row_width();
}

std::uint16_t to_bfloat16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

namespace {

template <class T, class Convert>
void patchify_typed(const std::uint8_t* rgb, Grid grid, const ModelProfile& p, int temporal, Convert convert, T* out) {
  const int P = p.patch_size;
  const int m = p.merge_size;
  const std::size_t stride = static_cast<std::size_t>(grid.w) * P * 3;
  const int row_len = 3 * temporal * P * P;
  T* row = out;
  for (int bh = 0; bh < grid.h / m; ++bh) {
    for (int bw = 0; bw < grid.w / m; ++bw) {
      for (int mh = 0; mh < m; ++mh) {
        for (int mw = 0; mw < m; ++mw) {
          const int y0 = (bh * m + mh) * P;
          const int x0 = (bw * m + mw) * P;
          for (int c = 0; c < 3; ++c) {
            T* first = row + static_cast<std::size_t>(c) * temporal * P * P;
            for (int ph = 0; ph < P; ++ph) {
              const std::uint8_t* src = rgb + static_cast<std::size_t>(y0 + ph) * stride + static_cast<std::size_t>(x0) * 3 + c;
              T* dst = first + ph * P;
              for (int pw = 0; pw < P; ++pw) dst[pw] = convert(c, src[pw * 3]);
            }
            for (int t = 1; t < temporal; ++t) std::memcpy(first + t * P * P, first, sizeof(T) * P * P);
          }
          row += row_len;
        }
      }
    }
  }
}

}  // namespace

void patchify(const std::uint8_t* rgb, Grid grid, const ModelProfile& p, const NormalizeTable& table, OutputType type,
              void* dest) {
  switch (type) {
    case OutputType::kFloat32:
      patchify_typed(rgb, grid, p, p.temporal_patch_size,
                     [&](int c, std::uint8_t v) { return table.value[c][v]; }, static_cast<float*>(dest));
      break;
    case OutputType::kBFloat16:
      patchify_typed(rgb, grid, p, p.temporal_patch_size,
                     [&](int c, std::uint8_t v) { return to_bfloat16(table.value[c][v]); },
                     static_cast<std::uint16_t*>(dest));
      break;
    case OutputType::kUInt8:
      patchify_typed(rgb, grid, p, 1, [](int, std::uint8_t v) { return v; }, static_cast<std::uint8_t*>(dest));
      break;
  }
}

}  // namespace mmfeed::vision
