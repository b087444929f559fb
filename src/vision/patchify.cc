// Normalize + patchify: a scalar reference (table lookups) and Highway SIMD kernels for every
// output type. The normalizing kernels (float32, bfloat16) divide without a division instruction: a product with the
// reciprocal, then one fused multiply-add correction step (the residual times the reciprocal),
// which gives the correctly rounded quotient for these inputs; NormalizeTable checks it equal
// to the table for every byte value and channel, and the table is used wherever it is not.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "vision/patchify.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef MMFEED_VISION_PATCHIFY_COMMON_
#define MMFEED_VISION_PATCHIFY_COMMON_

#include <cstring>
#include <type_traits>

#include "vision/patchify.h"

#include "core/scratch.h"

#endif  // MMFEED_VISION_PATCHIFY_COMMON_

HWY_BEFORE_NAMESPACE();
namespace mmfeed::vision::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// RN(n / d) for the float n, from q = RN(n * RN(1/d)) and one correction step.
template <class V>
HWY_INLINE V Quotient(V n, V d, V inv) {
  const V q = hn::Mul(n, inv);
  return hn::MulAdd(hn::NegMulAdd(q, d, n), inv, q);
}

// lanes bytes -> (RN(v / 255) - mean) / std, each step rounded to float32 as numpy does it.
template <class DF>
HWY_INLINE hn::Vec<DF> NormalizeVec(DF df, const std::uint8_t* src, hn::Vec<DF> mean, hn::Vec<DF> std,
                                    hn::Vec<DF> inv_std) {
  const hn::Rebind<std::int32_t, DF> di;
  const hn::Rebind<std::uint8_t, DF> d8;
  const auto v = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, src)));
  const auto x = Quotient(v, hn::Set(df, 255.0f), hn::Set(df, 1.0f / 255.0f));
  return Quotient(hn::Sub(x, mean), std, inv_std);
}

// n (a multiple of the vector length) bytes -> float32, for checking against the table.
void NormalizeBytes(const std::uint8_t* src, int n, float mean, float std, float* dst) {
  const hn::ScalableTag<float> df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  for (int i = 0; i < n; i += lanes) {
    hn::StoreU(NormalizeVec(df, src + i, hn::Set(df, mean), hn::Set(df, std), hn::Set(df, 1.0f / std)), df, dst + i);
  }
}

// Visits the patches in HF's row order: each band of merge * P image rows is first split into
// three planes (interleaved loads), then visit(plane, plane_size, plane_stride, last) runs per
// patch, `plane` at the patch's top-left byte in the first plane (the others plane_size bytes
// on), `last` for the image's last patch. Plane rows are padded by 64 bytes, so that a vector
// load starting inside a patch row stays in the buffer.
template <class Visit>
HWY_INLINE void ForEachPatch(const std::uint8_t* rgb, int gh, int gw, int P, int m, const Visit& visit) {
  const hn::ScalableTag<std::uint8_t> d8;
  const std::size_t lanes8 = hn::Lanes(d8);
  const std::size_t width = static_cast<std::size_t>(gw) * P;
  const std::size_t plane_stride = width + 64;
  const int band_rows = m * P;
  const std::size_t plane_size = band_rows * plane_stride;
  core::ScratchVector<std::uint8_t> planes(3 * plane_size);
  for (int bh = 0; bh < gh / m; ++bh) {
    for (int r = 0; r < band_rows; ++r) {
      const std::uint8_t* src = rgb + (static_cast<std::size_t>(bh) * band_rows + r) * width * 3;
      std::uint8_t* p0 = planes.data() + r * plane_stride;
      std::uint8_t* p1 = p0 + plane_size;
      std::uint8_t* p2 = p1 + plane_size;
      std::size_t x = 0;
      for (; x + lanes8 <= width; x += lanes8) {
        hn::Vec<decltype(d8)> a, b, c;
        hn::LoadInterleaved3(d8, src + 3 * x, a, b, c);
        hn::StoreU(a, d8, p0 + x);
        hn::StoreU(b, d8, p1 + x);
        hn::StoreU(c, d8, p2 + x);
      }
      for (; x < width; ++x) {
        p0[x] = src[3 * x];
        p1[x] = src[3 * x + 1];
        p2[x] = src[3 * x + 2];
      }
    }
    for (int bw = 0; bw < gw / m; ++bw) {
      for (int mh = 0; mh < m; ++mh) {
        for (int mw = 0; mw < m; ++mw) {
          const std::size_t x0 = static_cast<std::size_t>(bw * m + mw) * P;
          const bool last = bh == gh / m - 1 && bw == gw / m - 1 && mh == m - 1 && mw == m - 1;
          visit(planes.data() + mh * P * plane_stride + x0, plane_size, plane_stride, last);
        }
      }
    }
  }
}

// float32 -> bfloat16 bits, round to nearest even (the values are finite).
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<std::uint16_t, DF>> ToBFloat16(DF df, hn::Vec<DF> v) {
  const hn::Rebind<std::uint32_t, DF> du;
  const hn::Rebind<std::int32_t, DF> di;
  const hn::Rebind<std::uint16_t, DF> d16;
  (void)df;
  const auto bits = hn::BitCast(du, v);
  const auto odd = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du, 0x7FFFu), odd)));
  return hn::DemoteTo(d16, hn::BitCast(di, rounded));
}

// Rows in HF's patch order, float32 (T = float) or bfloat16 bits (T = uint16_t). Each patch
// is written in memory order: per channel, the P rows of P values of the first frame, each a whole number of
// vectors (a store may run up to a vector minus one value into the next row, which is written
// after it), then the frame copied to the other T - 1. With one frame the image's last channel
// block goes through the table, so nothing is written past the last row.
template <class T>
void PatchifyNormalized(const std::uint8_t* rgb, int gh, int gw, int P, int m, int frames, const float* mean,
                        const float* std, const float* table, T* out) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<std::uint16_t, decltype(df)> d16;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const std::size_t frame = static_cast<std::size_t>(P) * P;
  T* row = out;
  ForEachPatch(rgb, gh, gw, P, m, [&](const std::uint8_t* planes, std::size_t plane_size, std::size_t stride, bool last) {
    for (int c = 0; c < 3; ++c) {
      const std::uint8_t* plane = planes + c * plane_size;
      T* first = row + c * frames * frame;
      if (frames == 1 && last && c == 2) {
        for (int ph = 0; ph < P; ++ph) {
          for (int pw = 0; pw < P; ++pw) {
            const float v = table[c * 256 + plane[ph * stride + pw]];
            if constexpr (std::is_same_v<T, float>) {
              first[ph * P + pw] = v;
            } else {
              first[ph * P + pw] = to_bfloat16(v);
            }
          }
        }
        continue;
      }
      const auto vmean = hn::Set(df, mean[c]);
      const auto vstd = hn::Set(df, std[c]);
      const auto vinv = hn::Set(df, 1.0f / std[c]);
      for (int ph = 0; ph < P; ++ph) {
        for (int i = 0; i < P; i += lanes) {
          const auto v = NormalizeVec(df, plane + ph * stride + i, vmean, vstd, vinv);
          if constexpr (std::is_same_v<T, float>) {
            hn::StoreU(v, df, first + ph * P + i);
          } else {
            hn::StoreU(ToBFloat16(df, v), d16, first + ph * P + i);
          }
        }
      }
      for (int t = 1; t < frames; ++t) std::memcpy(first + t * frame, first, frame * sizeof(T));
    }
    row += 3 * frames * frame;
  });
}

void PatchifyF32(const std::uint8_t* rgb, int gh, int gw, int P, int m, int frames, const float* mean,
                 const float* std, const float* table, float* out) {
  PatchifyNormalized(rgb, gh, gw, P, m, frames, mean, std, table, out);
}

void PatchifyBF16(const std::uint8_t* rgb, int gh, int gw, int P, int m, int frames, const float* mean,
                  const float* std, const float* table, std::uint16_t* out) {
  PatchifyNormalized(rgb, gh, gw, P, m, frames, mean, std, table, out);
}

// uint8 rows of C*P*P: the planes' bytes, P at a time - as 16-byte moves where P <= 16 (the
// bytes past P land on the next row, written after it; the image's last row is copied exactly).
void PatchifyU8(const std::uint8_t* rgb, int gh, int gw, int P, int m, std::uint8_t* out) {
  std::uint8_t* row = out;
  ForEachPatch(rgb, gh, gw, P, m, [&](const std::uint8_t* planes, std::size_t plane_size, std::size_t stride, bool last) {
    for (int c = 0; c < 3; ++c) {
      const std::uint8_t* plane = planes + c * plane_size;
      for (int ph = 0; ph < P; ++ph, row += P) {
        if (P <= 16 && !(last && c == 2 && ph == P - 1)) {
          std::memcpy(row, plane + ph * stride, 16);
        } else {
          std::memcpy(row, plane + ph * stride, P);
        }
      }
    }
  });
}

}  // namespace mmfeed::vision::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace mmfeed::vision {

HWY_EXPORT(NormalizeBytes);
HWY_EXPORT(PatchifyF32);
HWY_EXPORT(PatchifyBF16);
HWY_EXPORT(PatchifyU8);

NormalizeTable::NormalizeTable(const ModelProfile& p) {
  const double rescale = 1.0 / 255.0;
  for (int c = 0; c < 3; ++c) {
    mean[c] = p.mean[c];
    std[c] = p.std[c];
    for (int v = 0; v < 256; ++v) {
      // volatile keeps each step a float32 operation, as numpy does it.
      volatile float x = static_cast<float>(static_cast<double>(v) * rescale);
      volatile float centred = x - p.mean[c];
      value[c][v] = centred / p.std[c];
    }
  }
  std::uint8_t bytes[256 + 64] = {};
  for (int v = 0; v < 256; ++v) bytes[v] = static_cast<std::uint8_t>(v);
  float got[256 + 64];
  simd_exact = true;
  for (int c = 0; c < 3; ++c) {
    HWY_DYNAMIC_DISPATCH(NormalizeBytes)(bytes, 256, mean[c], std[c], got);
    simd_exact = simd_exact && std::memcmp(got, value[c].data(), 256 * sizeof(float)) == 0;
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
              void* dest, Kernel kernel) {
  const int P = p.patch_size;
  const int m = p.merge_size;
  const int T = p.temporal_patch_size;
  const bool simd = kernel != Kernel::kScalar;
  switch (type) {
    case OutputType::kFloat32:
      if (simd && table.simd_exact) {
        HWY_DYNAMIC_DISPATCH(PatchifyF32)(rgb, grid.h, grid.w, P, m, T, table.mean.data(), table.std.data(),
                                          table.value[0].data(), static_cast<float*>(dest));
        return;
      }
      patchify_typed(rgb, grid, p, T, [&](int c, std::uint8_t v) { return table.value[c][v]; },
                     static_cast<float*>(dest));
      return;
    case OutputType::kBFloat16:
      if (simd && table.simd_exact) {
        HWY_DYNAMIC_DISPATCH(PatchifyBF16)(rgb, grid.h, grid.w, P, m, T, table.mean.data(), table.std.data(),
                                           table.value[0].data(), static_cast<std::uint16_t*>(dest));
        return;
      }
      patchify_typed(rgb, grid, p, T, [&](int c, std::uint8_t v) { return to_bfloat16(table.value[c][v]); },
                     static_cast<std::uint16_t*>(dest));
      return;
    case OutputType::kUInt8:
      if (simd) {
        HWY_DYNAMIC_DISPATCH(PatchifyU8)(rgb, grid.h, grid.w, P, m, static_cast<std::uint8_t*>(dest));
        return;
      }
      patchify_typed(rgb, grid, p, 1, [](int, std::uint8_t v) { return v; }, static_cast<std::uint8_t*>(dest));
      return;
  }
}

}  // namespace mmfeed::vision

#endif  // HWY_ONCE
