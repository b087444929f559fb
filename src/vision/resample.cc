// Pillow-exact resampling: the scalar reference kernels and the Highway SIMD kernels. Both
// compute the same 32-bit integer sums (products of 8-bit samples and 22-bit coefficients,
// started at 2^21, shifted right by 22, clamped to 0..255), so their outputs are identical.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "vision/resample.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef MMFEED_VISION_RESAMPLE_COMMON_
#define MMFEED_VISION_RESAMPLE_COMMON_

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "vision/resample.h"

#include "core/scratch.h"

namespace mmfeed::vision::detail {

constexpr int kPrecisionBits = 32 - 8 - 2;

inline std::uint8_t clip8(std::int32_t ss) {
  const std::int32_t v = ss >> kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

}  // namespace mmfeed::vision::detail

#endif  // MMFEED_VISION_RESAMPLE_COMMON_

HWY_BEFORE_NAMESPACE();
namespace mmfeed::vision::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One output row of the vertical pass: out[i] = clip8(2^21 + sum_t rows[t][i] * k[t]).
void VerticalRow(const std::uint8_t* const* rows, const std::int32_t* k, int taps, std::size_t n,
                 std::uint8_t* out) {
  const hn::ScalableTag<std::int32_t> d32;
  const hn::Rebind<std::uint8_t, decltype(d32)> d8;
  const std::size_t lanes = hn::Lanes(d32);
  std::size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    auto acc0 = hn::Set(d32, 1 << (detail::kPrecisionBits - 1));
    auto acc1 = acc0;
    for (int t = 0; t < taps; ++t) {
      const auto kv = hn::Set(d32, k[t]);
      const std::uint8_t* row = rows[t] + i;
      acc0 = hn::Add(acc0, hn::Mul(hn::PromoteTo(d32, hn::LoadU(d8, row)), kv));
      acc1 = hn::Add(acc1, hn::Mul(hn::PromoteTo(d32, hn::LoadU(d8, row + lanes)), kv));
    }
    hn::StoreU(hn::DemoteTo(d8, hn::ShiftRight<detail::kPrecisionBits>(acc0)), d8, out + i);
    hn::StoreU(hn::DemoteTo(d8, hn::ShiftRight<detail::kPrecisionBits>(acc1)), d8, out + i + lanes);
  }
  for (; i < n; ++i) {
    std::int32_t ss = 1 << (detail::kPrecisionBits - 1);
    for (int t = 0; t < taps; ++t) ss += rows[t][i] * k[t];
    out[i] = detail::clip8(ss);
  }
}

// Five RGB rows of the horizontal pass at once. `cols` holds the five rows transposed: for each
// input column x, 16 bytes = rows 0-4 x (R, G, B), then one pad byte. Every output pixel is
// then a plain dot product over its taps of 16-byte columns with one coefficient per tap -
// contiguous loads, no gathers. Results go to out[r] for the rows that exist (n_rows <= 5).
void HorizontalBlockRgb(const std::uint8_t* cols, const std::int32_t* k, int ksize, const int* first,
                        const int* count, int out_w, std::uint8_t* const* out, int n_rows) {
  const hn::ScalableTag<std::int32_t> d32;
  const hn::Rebind<std::uint8_t, decltype(d32)> d8;
  const std::size_t lanes = hn::Lanes(d32);
  const std::size_t vecs = 16 / lanes;  // 1 (AVX-512), 2 (AVX2), 4 (SSE4)
  HWY_ALIGN std::uint8_t result[16];
  using V = hn::Vec<decltype(d32)>;
  for (int x = 0; x < out_w; ++x) {
    V acc[4];
    for (std::size_t v = 0; v < vecs; ++v) acc[v] = hn::Set(d32, 1 << (detail::kPrecisionBits - 1));
    const std::int32_t* kx = k + static_cast<std::size_t>(x) * ksize;
    const std::uint8_t* col = cols + static_cast<std::size_t>(first[x]) * 16;
    for (int t = 0; t < count[x]; ++t, col += 16) {
      const auto kv = hn::Set(d32, kx[t]);
      for (std::size_t v = 0; v < vecs; ++v) {
        acc[v] = hn::Add(acc[v], hn::Mul(hn::PromoteTo(d32, hn::LoadU(d8, col + v * lanes)), kv));
      }
    }
    for (std::size_t v = 0; v < vecs; ++v) {
      hn::StoreU(hn::DemoteTo(d8, hn::ShiftRight<detail::kPrecisionBits>(acc[v])), d8, result + v * lanes);
    }
    // 4-byte moves: the byte past the pixel is overwritten by pixel x + 1 (the last pixel of a
    // row is copied exactly, so nothing lands past the row).
    if (x + 1 < out_w) {
      for (int r = 0; r < n_rows; ++r) std::memcpy(out[r] + static_cast<std::size_t>(x) * 3, result + r * 3, 4);
    } else {
      for (int r = 0; r < n_rows; ++r) std::memcpy(out[r] + static_cast<std::size_t>(x) * 3, result + r * 3, 3);
    }
  }
}

const char* TargetNameHere() { return hwy::TargetName(HWY_TARGET); }

}  // namespace mmfeed::vision::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace mmfeed::vision {

HWY_EXPORT(VerticalRow);
HWY_EXPORT(HorizontalBlockRgb);
HWY_EXPORT(TargetNameHere);

namespace {

double box_filter(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }

double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double hamming_filter(double x) {
  if (x < 0.0) x = -x;
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * M_PI;
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}

double bicubic_filter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc_filter(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}

double lanczos_filter(double x) {
  if (-3.0 <= x && x < 3.0) return sinc_filter(x) * sinc_filter(x / 3);
  return 0.0;
}

struct FilterDef {
  double (*fn)(double);
  double support;
};

FilterDef filter_def(Filter f) {
  switch (f) {
    case Filter::kBox: return {box_filter, 0.5};
    case Filter::kBilinear: return {bilinear_filter, 1.0};
    case Filter::kHamming: return {hamming_filter, 1.0};
    case Filter::kBicubic: return {bicubic_filter, 2.0};
    case Filter::kLanczos: return {lanczos_filter, 3.0};
  }
  return {bicubic_filter, 2.0};
}

void horizontal_scalar(const std::uint8_t* in, int in_w, int channels, int first_row, int rows, const Coefficients& c,
                       int out_w, std::uint8_t* out) {
  const std::size_t in_stride = static_cast<std::size_t>(in_w) * channels;
  const std::size_t out_stride = static_cast<std::size_t>(out_w) * channels;
  for (int y = 0; y < rows; ++y) {
    const std::uint8_t* src = in + static_cast<std::size_t>(first_row + y) * in_stride;
    std::uint8_t* dst = out + static_cast<std::size_t>(y) * out_stride;
    for (int x = 0; x < out_w; ++x) {
      const std::int32_t* k = &c.k[static_cast<std::size_t>(x) * c.ksize];
      const std::uint8_t* p = src + static_cast<std::size_t>(c.first[x]) * channels;
      for (int ch = 0; ch < channels; ++ch) {
        std::int32_t ss = 1 << (detail::kPrecisionBits - 1);
        for (int t = 0; t < c.count[x]; ++t) ss += p[t * channels + ch] * k[t];
        dst[x * channels + ch] = detail::clip8(ss);
      }
    }
  }
}

void vertical_scalar(const std::uint8_t* in, std::size_t stride, const Coefficients& c, int row_shift, int out_h,
                     std::uint8_t* out) {
  for (int y = 0; y < out_h; ++y) {
    const std::int32_t* k = &c.k[static_cast<std::size_t>(y) * c.ksize];
    const std::uint8_t* base = in + static_cast<std::size_t>(c.first[y] - row_shift) * stride;
    std::uint8_t* dst = out + static_cast<std::size_t>(y) * stride;
    for (std::size_t i = 0; i < stride; ++i) {
      std::int32_t ss = 1 << (detail::kPrecisionBits - 1);
      for (int t = 0; t < c.count[y]; ++t) ss += base[t * stride + i] * k[t];
      dst[i] = detail::clip8(ss);
    }
  }
}

void vertical_simd(const std::uint8_t* in, std::size_t stride, const Coefficients& c, int row_shift, int out_h,
                   std::uint8_t* out) {
  std::vector<const std::uint8_t*> rows(static_cast<std::size_t>(c.ksize));
  for (int y = 0; y < out_h; ++y) {
    const int n = c.count[y];
    for (int t = 0; t < n; ++t) rows[t] = in + static_cast<std::size_t>(c.first[y] - row_shift + t) * stride;
    HWY_DYNAMIC_DISPATCH(VerticalRow)(rows.data(), &c.k[static_cast<std::size_t>(y) * c.ksize], n, stride,
                                      out + static_cast<std::size_t>(y) * stride);
  }
}

// The horizontal pass five rows at a time on transposed columns (HorizontalBlockRgb).
void horizontal_block_rgb(const std::uint8_t* in, int in_w, int first_row, int rows, const Coefficients& c, int out_w,
                          std::uint8_t* out) {
  const std::size_t in_stride = static_cast<std::size_t>(in_w) * 3;
  const std::size_t out_stride = static_cast<std::size_t>(out_w) * 3;
  std::vector<std::uint8_t> cols(static_cast<std::size_t>(in_w) * 16 + 64, 0);
  for (int y = 0; y < rows; y += 5) {
    const int n = std::min(5, rows - y);
    const std::uint8_t* src[5];
    for (int r = 0; r < 5; ++r) src[r] = in + static_cast<std::size_t>(first_row + y + std::min(r, n - 1)) * in_stride;
    // Column x gets the five rows' pixel x: 4-byte moves, each next one overwriting the byte
    // the previous carried past its pixel (the last pixel of a row is copied exactly, so no
    // read goes past the image).
    std::uint8_t* dst = cols.data();
    for (int x = 0; x + 1 < in_w; ++x, dst += 16) {
      for (int r = 0; r < 5; ++r) std::memcpy(dst + r * 3, src[r] + static_cast<std::size_t>(x) * 3, 4);
    }
    for (int r = 0; r < 5; ++r) std::memcpy(dst + r * 3, src[r] + static_cast<std::size_t>(in_w - 1) * 3, 3);
    std::uint8_t* outs[5];
    for (int r = 0; r < n; ++r) outs[r] = out + static_cast<std::size_t>(y + r) * out_stride;
    HWY_DYNAMIC_DISPATCH(HorizontalBlockRgb)(cols.data(), c.k.data(), c.ksize, c.first.data(), c.count.data(), out_w,
                                             outs, n);
  }
}

}  // namespace

const char* simd_target() {
  return HWY_DYNAMIC_DISPATCH(TargetNameHere)();
}

Coefficients precompute_coefficients(int in_size, int out_size, Filter filter) {
  const FilterDef f = filter_def(filter);
  // Pillow computes the box extent in float and the rest in double, in this order.
  const float in0 = 0.0f;
  const float in1 = static_cast<float>(in_size);
  double scale = static_cast<double>(in1 - in0) / out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = f.support * filterscale;
  Coefficients c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.k.assign(static_cast<std::size_t>(out_size) * c.ksize, 0);
  std::vector<double> kk(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    double ww = 0.0;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    for (int x = 0; x < xmax; ++x) {
      const double w = f.fn((x + xmin - center + 0.5) * ss);
      kk[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) kk[x] /= ww;
    }
    for (int x = 0; x < xmax; ++x) {
      const double v = kk[x] * (1 << detail::kPrecisionBits);
      c.k[static_cast<std::size_t>(xx) * c.ksize + x] = kk[x] < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v);
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

void resample_u8(const std::uint8_t* in, int in_w, int in_h, int channels, std::uint8_t* out, int out_w, int out_h,
                 Filter filter, Kernel kernel) {
  const bool simd = kernel != Kernel::kScalar;
  const bool need_h = out_w != in_w;
  const bool need_v = out_h != in_h;
  if (!need_h && !need_v) {
    std::memcpy(out, in, static_cast<std::size_t>(in_w) * in_h * channels);
    return;
  }
  auto horizontal = [&](const std::uint8_t* src, int first_row, int rows, const Coefficients& c,
                        std::uint8_t* dst) {
    if (simd && channels == 3) {
      horizontal_block_rgb(src, in_w, first_row, rows, c, out_w, dst);
    } else {
      horizontal_scalar(src, in_w, channels, first_row, rows, c, out_w, dst);
    }
  };
  auto vertical = [&](const std::uint8_t* src, std::size_t stride, const Coefficients& c, int row_shift,
                      std::uint8_t* dst) {
    if (simd) {
      vertical_simd(src, stride, c, row_shift, out_h, dst);
    } else {
      vertical_scalar(src, stride, c, row_shift, out_h, dst);
    }
  };
  // Pillow 12.2+: when the height shrinks by more than twice what the width does, the vertical
  // pass runs first (on whole rows) and the horizontal pass on its output.
  const bool horizontal_first = !((in_h - out_h) > 0 && (in_h - out_h) > (in_w - out_w) * 2);
  const Coefficients vert = precompute_coefficients(in_h, out_h, filter);
  core::ScratchVector<std::uint8_t> temp;
  if (!horizontal_first) {
    if (!need_h) {
      vertical(in, static_cast<std::size_t>(in_w) * channels, vert, 0, out);
      return;
    }
    temp.resize(static_cast<std::size_t>(in_w) * out_h * channels);
    vertical(in, static_cast<std::size_t>(in_w) * channels, vert, 0, temp.data());
    horizontal(temp.data(), 0, out_h, precompute_coefficients(in_w, out_w, filter), out);
    return;
  }
  if (!need_h) {
    vertical(in, static_cast<std::size_t>(in_w) * channels, vert, 0, out);
    return;
  }
  const Coefficients horiz = precompute_coefficients(in_w, out_w, filter);
  if (!need_v) {
    horizontal(in, 0, in_h, horiz, out);
    return;
  }
  // Only the rows the vertical pass reads go through the horizontal pass.
  const int first_row = vert.first[0];
  const int last_row = vert.first[out_h - 1] + vert.count[out_h - 1];
  temp.resize(static_cast<std::size_t>(out_w) * (last_row - first_row) * channels);
  horizontal(in, first_row, last_row - first_row, horiz, temp.data());
  vertical(temp.data(), static_cast<std::size_t>(out_w) * channels, vert, first_row, out);
}

}  // namespace mmfeed::vision

#endif  // HWY_ONCE
