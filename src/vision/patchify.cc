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

// lanes bytes -> (RN(v / 255) - mean) / std (`rescale`), or (v - mean) / std, each step rounded
// to float32 as numpy and torch do it.
template <class DF>
HWY_INLINE hn::Vec<DF> NormalizeVec(DF df, const std::uint8_t* src, hn::Vec<DF> mean, hn::Vec<DF> std,
                                    hn::Vec<DF> inv_std, bool rescale) {
  const hn::Rebind<std::int32_t, DF> di;
  const hn::Rebind<std::uint8_t, DF> d8;
  auto x = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, src)));
  if (rescale) x = Quotient(x, hn::Set(df, 255.0f), hn::Set(df, 1.0f / 255.0f));
  return Quotient(hn::Sub(x, mean), std, inv_std);
}

// n (a multiple of the vector length) bytes -> float32, for checking against the table.
void NormalizeBytes(const std::uint8_t* src, int n, float mean, float std, bool rescale, float* dst) {
  const hn::ScalableTag<float> df;
  const int lanes = static_cast<int>(hn::Lanes(df));
  for (int i = 0; i < n; i += lanes) {
    hn::StoreU(NormalizeVec(df, src + i, hn::Set(df, mean), hn::Set(df, std), hn::Set(df, 1.0f / std), rescale), df,
               dst + i);
  }
}

// Visits the patches in HF's row order: each band of merge * P image rows of each of the
// `nframes` frames is first split into three planes (interleaved loads), then
// visit(plane, plane_size, plane_stride, last) runs per patch, `plane` at the patch's top-left
// byte in the first plane (frame f's channel c is plane f * 3 + c, plane_size bytes apart),
// `last` for the image's last patch. Plane rows are padded by 64 bytes, so that a vector load
// starting inside a patch row stays in the buffer.
template <class Visit>
HWY_INLINE void ForEachPatch(const std::uint8_t* const* frames, int nframes, int gh, int gw, int P, int m,
                             const Visit& visit) {
  const hn::ScalableTag<std::uint8_t> d8;
  const std::size_t lanes8 = hn::Lanes(d8);
  const std::size_t width = static_cast<std::size_t>(gw) * P;
  const std::size_t plane_stride = width + 64;
  const int band_rows = m * P;
  const std::size_t plane_size = band_rows * plane_stride;
  core::ScratchVector<std::uint8_t> planes(3 * plane_size * nframes);
  for (int bh = 0; bh < gh / m; ++bh) {
    for (int band_row = 0; band_row < nframes * band_rows; ++band_row) {
      const int fr = band_row / band_rows;
      const int r = band_row % band_rows;
      const std::uint8_t* src = frames[fr] + (static_cast<std::size_t>(bh) * band_rows + r) * width * 3;
      std::uint8_t* p0 = planes.data() + fr * 3 * plane_size + r * plane_stride;
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
// is written in memory order: per channel, per frame, P rows of P values, each a whole number of
// vectors (a store may run up to a vector minus one value into the next block, which is written
// after it). One image (nframes 1) is copied to the other temporal slots; a video's group gives
// one frame per slot (nframes = frames). The last block of the last patch goes through the
// table, so nothing is written past the last row.
template <class T>
void PatchifyNormalized(const std::uint8_t* const* images, int nframes, int gh, int gw, int P, int m, int frames,
                        const float* mean, const float* std, bool rescale, const float* table, T* out) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<std::uint16_t, decltype(df)> d16;
  const int lanes = static_cast<int>(hn::Lanes(df));
  const std::size_t frame = static_cast<std::size_t>(P) * P;
  T* row = out;
  ForEachPatch(images, nframes, gh, gw, P, m,
               [&](const std::uint8_t* planes, std::size_t plane_size, std::size_t stride, bool last) {
                 for (int c = 0; c < 3; ++c) {
                   const auto vmean = hn::Set(df, mean[c]);
                   const auto vstd = hn::Set(df, std[c]);
                   const auto vinv = hn::Set(df, 1.0f / std[c]);
                   for (int f = 0; f < nframes; ++f) {
                     const std::uint8_t* plane = planes + (f * 3 + c) * plane_size;
                     T* block = row + (c * frames + f) * frame;
                     if (last && c == 2 && f == nframes - 1 && (nframes > 1 || frames == 1)) {
                       for (int ph = 0; ph < P; ++ph) {
                         for (int pw = 0; pw < P; ++pw) {
                           const float v = table[c * 256 + plane[ph * stride + pw]];
                           if constexpr (std::is_same_v<T, float>) {
                             block[ph * P + pw] = v;
                           } else {
                             block[ph * P + pw] = to_bfloat16(v);
                           }
                         }
                       }
                       continue;
                     }
                     for (int ph = 0; ph < P; ++ph) {
                       for (int i = 0; i < P; i += lanes) {
                         const auto v = NormalizeVec(df, plane + ph * stride + i, vmean, vstd, vinv, rescale);
                         if constexpr (std::is_same_v<T, float>) {
                           hn::StoreU(v, df, block + ph * P + i);
                         } else {
                           hn::StoreU(ToBFloat16(df, v), d16, block + ph * P + i);
                         }
                       }
                     }
                   }
                   if (nframes == 1) {
                     T* first = row + c * frames * frame;
                     for (int t = 1; t < frames; ++t) std::memcpy(first + t * frame, first, frame * sizeof(T));
                   }
                 }
                 row += 3 * frames * frame;
               });
}

void PatchifyF32(const std::uint8_t* const* images, int nframes, int gh, int gw, int P, int m, int frames,
                 const float* mean, const float* std, bool rescale, const float* table, float* out) {
  PatchifyNormalized(images, nframes, gh, gw, P, m, frames, mean, std, rescale, table, out);
}

void PatchifyBF16(const std::uint8_t* const* images, int nframes, int gh, int gw, int P, int m, int frames,
                  const float* mean, const float* std, bool rescale, const float* table, std::uint16_t* out) {
  PatchifyNormalized(images, nframes, gh, gw, P, m, frames, mean, std, rescale, table, out);
}

// uint8 rows of C*P*P: the planes' bytes, P at a time - as 16-byte moves where P <= 16 (the
// bytes past P land on the next row, written after it; the image's last row is copied exactly).
void PatchifyU8(const std::uint8_t* rgb, int gh, int gw, int P, int m, std::uint8_t* out) {
  std::uint8_t* row = out;
  ForEachPatch(&rgb, 1, gh, gw, P, m,
               [&](const std::uint8_t* planes, std::size_t plane_size, std::size_t stride, bool last) {
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

NormalizeTable::NormalizeTable(const ModelProfile& p, ImageBackend how) : rescale(how == ImageBackend::kPil) {
  for (int c = 0; c < 3; ++c) {
    if (rescale) {
      mean[c] = p.mean[c];
      std[c] = p.std[c];
    } else {
      // torch: tensor(mean) * (1 / rescale_factor), a float32 product (1 / (1/255) is 255.0).
      volatile float scaled_mean = p.mean[c] * 255.0f;
      volatile float scaled_std = p.std[c] * 255.0f;
      mean[c] = scaled_mean;
      std[c] = scaled_std;
    }
    for (int v = 0; v < 256; ++v) {
      // volatile keeps each step a float32 operation, as numpy and torch do it.
      volatile float x = rescale ? static_cast<float>(static_cast<double>(v) * (1.0 / 255.0)) : static_cast<float>(v);
      volatile float centred = x - mean[c];
      value[c][v] = centred / std[c];
    }
  }
  std::uint8_t bytes[256 + 64] = {};
  for (int v = 0; v < 256; ++v) bytes[v] = static_cast<std::uint8_t>(v);
  float got[256 + 64];
  simd_exact = true;
  for (int c = 0; c < 3; ++c) {
    HWY_DYNAMIC_DISPATCH(NormalizeBytes)(bytes, 256, mean[c], std[c], rescale, got);
    simd_exact = simd_exact && std::memcmp(got, value[c].data(), 256 * sizeof(float)) == 0;
  }
}

int element_size(Pixels type) {
  switch (type) {
    case Pixels::kFloat32: return 4;
    case Pixels::kBFloat16: return 2;
    case Pixels::kUInt8: return 1;
  }
  return 4;
}

int row_elements(const ModelProfile& p, Pixels type) {
  return type == Pixels::kUInt8 ? 3 * p.patch_size * p.patch_size : p.row_width();
}

std::uint16_t to_bfloat16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

namespace {

// The reference: `nframes` images (1: repeated over the `temporal` slots; else one per slot).
template <class T, class Convert>
void patchify_typed(const std::uint8_t* const* frames, int nframes, Grid grid, const ModelProfile& p, int temporal,
                    Convert convert, T* out) {
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
            for (int t = 0; t < temporal; ++t) {
              T* block = row + static_cast<std::size_t>(c * temporal + t) * P * P;
              if (nframes == 1 && t > 0) {
                std::memcpy(block, block - P * P, sizeof(T) * P * P);
                continue;
              }
              for (int ph = 0; ph < P; ++ph) {
                const std::uint8_t* src =
                    frames[t] + static_cast<std::size_t>(y0 + ph) * stride + static_cast<std::size_t>(x0) * 3 + c;
                for (int pw = 0; pw < P; ++pw) block[ph * P + pw] = convert(c, src[pw * 3]);
              }
            }
          }
          row += row_len;
        }
      }
    }
  }
}

void patchify_frames(const std::uint8_t* const* frames, int nframes, Grid grid, const ModelProfile& p,
                     const NormalizeTable& table, Pixels type, void* dest, ImageKernel kernel) {
  const int P = p.patch_size;
  const int m = p.merge_size;
  const int T = nframes == 1 ? p.temporal_patch_size : nframes;
  const bool simd = kernel != ImageKernel::kScalar;
  switch (type) {
    case Pixels::kFloat32:
      if (simd && table.simd_exact) {
        HWY_DYNAMIC_DISPATCH(PatchifyF32)
        (frames, nframes, grid.h, grid.w, P, m, T, table.mean.data(), table.std.data(), table.rescale,
         table.value[0].data(), static_cast<float*>(dest));
        return;
      }
      patchify_typed(
          frames, nframes, grid, p, T, [&](int c, std::uint8_t v) { return table.value[c][v]; },
          static_cast<float*>(dest));
      return;
    case Pixels::kBFloat16:
      if (simd && table.simd_exact) {
        HWY_DYNAMIC_DISPATCH(PatchifyBF16)
        (frames, nframes, grid.h, grid.w, P, m, T, table.mean.data(), table.std.data(), table.rescale,
         table.value[0].data(), static_cast<std::uint16_t*>(dest));
        return;
      }
      patchify_typed(
          frames, nframes, grid, p, T, [&](int c, std::uint8_t v) { return to_bfloat16(table.value[c][v]); },
          static_cast<std::uint16_t*>(dest));
      return;
    case Pixels::kUInt8:
      if (simd && nframes == 1) {
        HWY_DYNAMIC_DISPATCH(PatchifyU8)(frames[0], grid.h, grid.w, P, m, static_cast<std::uint8_t*>(dest));
        return;
      }
      patchify_typed(
          frames, nframes, grid, p, nframes, [](int, std::uint8_t v) { return v; }, static_cast<std::uint8_t*>(dest));
      return;
  }
}

}  // namespace

void patchify(const std::uint8_t* rgb, Grid grid, const ModelProfile& p, const NormalizeTable& table, Pixels type,
              void* dest, ImageKernel kernel) {
  patchify_frames(&rgb, 1, grid, p, table, type, dest, kernel);
}

void patchify_group(const std::uint8_t* const* frames, Grid grid, const ModelProfile& p, const NormalizeTable& table,
                    Pixels type, void* dest, ImageKernel kernel) {
  patchify_frames(frames, p.temporal_patch_size, grid, p, table, type, dest, kernel);
}

}  // namespace mmfeed::vision

#endif  // HWY_ONCE
