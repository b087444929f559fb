// Pillow-exact resampling: the scalar reference kernels and the Highway SIMD kernels. Both
// compute the same 32-bit integer sums (products of 8-bit samples and 22-bit coefficients,
// started at 2^21, shifted right by 22, clamped to 0..255), so their outputs are identical.
// The byte-dot kernels for AVX-512 VNNI CPUs are in resample_dot.cc. Over 400 lines because the
// reference kernels, the Highway kernels and the coefficient tables they share stay in one file,
// side by side (STYLE.md: speed never without the exact reference beside it).

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "vision/resample.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef MMFEED_VISION_RESAMPLE_COMMON_
#define MMFEED_VISION_RESAMPLE_COMMON_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "vision/resample.h"

#include "core/scratch.h"

#include "vision/resample_dot.h"

namespace mmfeed::vision::detail {

inline std::uint8_t clip8(std::int32_t ss) {
  const std::int32_t v = ss >> kResamplePrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

}  // namespace mmfeed::vision::detail

#endif  // MMFEED_VISION_RESAMPLE_COMMON_

HWY_BEFORE_NAMESPACE();
namespace mmfeed::vision::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One output row of the vertical pass over `taps` consecutive input rows from `base` (`n` bytes
// each, `n` apart): out[i] = clip8(2^21 + sum_t base[t * n + i] * k[t]).
void VerticalRow(const std::uint8_t* base, const std::int32_t* k, int taps, std::size_t n, std::uint8_t* out) {
  const hn::ScalableTag<std::int32_t> d32;
  const hn::Rebind<std::uint8_t, decltype(d32)> d8;
  const std::size_t lanes = hn::Lanes(d32);
  std::size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    auto acc0 = hn::Set(d32, 1 << (kResamplePrecisionBits - 1));
    auto acc1 = acc0;
    for (int t = 0; t < taps; ++t) {
      const auto kv = hn::Set(d32, k[t]);
      const std::uint8_t* row = base + t * n + i;
      acc0 = hn::Add(acc0, hn::Mul(hn::PromoteTo(d32, hn::LoadU(d8, row)), kv));
      acc1 = hn::Add(acc1, hn::Mul(hn::PromoteTo(d32, hn::LoadU(d8, row + lanes)), kv));
    }
    hn::StoreU(hn::DemoteTo(d8, hn::ShiftRight<kResamplePrecisionBits>(acc0)), d8, out + i);
    hn::StoreU(hn::DemoteTo(d8, hn::ShiftRight<kResamplePrecisionBits>(acc1)), d8, out + i + lanes);
  }
  for (; i < n; ++i) {
    std::int32_t ss = 1 << (kResamplePrecisionBits - 1);
    for (int t = 0; t < taps; ++t) ss += base[t * n + i] * k[t];
    out[i] = detail::clip8(ss);
  }
}

// Five RGB rows of the horizontal pass at once. `cols` holds the five rows transposed: for each
// input column x, 16 bytes = rows 0-4 x (R, G, B), then one pad byte. Every output pixel is
// then a plain dot product over its taps of 16-byte columns with one coefficient per tap -
// contiguous loads, no gathers. Results go to out[r] for the rows that exist (n_rows <= 5).
void HorizontalBlockRgb(const std::uint8_t* cols, const std::int32_t* k, int ksize, const int* first, const int* count,
                        int out_w, std::uint8_t* const* out, int n_rows) {
  const hn::ScalableTag<std::int32_t> d32;
  const hn::Rebind<std::uint8_t, decltype(d32)> d8;
  const std::size_t lanes = hn::Lanes(d32);
  const std::size_t vecs = 16 / lanes;  // 1 (AVX-512), 2 (AVX2), 4 (SSE4)
  HWY_ALIGN std::uint8_t result[16];
  using V = hn::Vec<decltype(d32)>;
  for (int x = 0; x < out_w; ++x) {
    V acc[16];  // vecs <= 16 (one lane per vector on the scalar target)
    for (std::size_t v = 0; v < vecs; ++v) acc[v] = hn::Set(d32, 1 << (kResamplePrecisionBits - 1));
    const std::int32_t* kx = k + static_cast<std::size_t>(x) * ksize;
    const std::uint8_t* col = cols + static_cast<std::size_t>(first[x]) * 16;
    for (int t = 0; t < count[x]; ++t, col += 16) {
      const auto kv = hn::Set(d32, kx[t]);
      for (std::size_t v = 0; v < vecs; ++v) {
        acc[v] = hn::Add(acc[v], hn::Mul(hn::PromoteTo(d32, hn::LoadU(d8, col + v * lanes)), kv));
      }
    }
    for (std::size_t v = 0; v < vecs; ++v) {
      hn::StoreU(hn::DemoteTo(d8, hn::ShiftRight<kResamplePrecisionBits>(acc[v])), d8, result + v * lanes);
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

// torch's form of the same cubic (aten's cubic_convolution1/2 with A = -0.5), which rounds
// differently from Pillow's in the last bits of some weights.
double torch_bicubic_filter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
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

FilterDef filter_def(ResizeFilter f) {
  switch (f) {
    case ResizeFilter::kBox: return {box_filter, 0.5};
    case ResizeFilter::kBilinear: return {bilinear_filter, 1.0};
    case ResizeFilter::kHamming: return {hamming_filter, 1.0};
    case ResizeFilter::kBicubic: return {bicubic_filter, 2.0};
    case ResizeFilter::kLanczos: return {lanczos_filter, 3.0};
    case ResizeFilter::kBicubicTorch: return {torch_bicubic_filter, 2.0};
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
        std::int32_t ss = 1 << (kResamplePrecisionBits - 1);
        for (int t = 0; t < c.count[x]; ++t) ss += p[t * channels + ch] * k[t];
        dst[x * channels + ch] = detail::clip8(ss);
      }
    }
  }
}

void vertical_scalar(const std::uint8_t* in, std::size_t stride, const Coefficients& c, int row_shift, int y0, int y1,
                     std::uint8_t* out) {
  for (int y = y0; y < y1; ++y) {
    const std::int32_t* k = &c.k[static_cast<std::size_t>(y) * c.ksize];
    const std::uint8_t* base = in + static_cast<std::size_t>(c.first[y] - row_shift) * stride;
    std::uint8_t* dst = out + static_cast<std::size_t>(y) * stride;
    for (std::size_t i = 0; i < stride; ++i) {
      std::int32_t ss = 1 << (kResamplePrecisionBits - 1);
      for (int t = 0; t < c.count[y]; ++t) ss += base[t * stride + i] * k[t];
      dst[i] = detail::clip8(ss);
    }
  }
}

// The horizontal pass five rows at a time on transposed columns (HorizontalBlockRgb).
}  // namespace

const char* simd_target() { return HWY_DYNAMIC_DISPATCH(TargetNameHere)(); }

Coefficients precompute_coefficients(int in_size, int out_size, ResizeFilter filter) {
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
  std::vector<double> kk(static_cast<std::size_t>(out_size) * c.ksize, 0.0);
  double max_weight = 0.0;
  for (int xx = 0; xx < out_size; ++xx) {
    double* k = &kk[static_cast<std::size_t>(xx) * c.ksize];
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
      k[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) k[x] /= ww;
      max_weight = std::max(max_weight, k[x]);
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  // Pillow rounds to 22 bits. torch rounds to int16 at the most bits under 22 that keep twice
  // the axis's largest weight below 2^15, and sums from 2^(bits-1) shifted right by `bits`; a
  // coefficient scaled by 2^(22-bits) after rounding gives the same sums times 2^(22-bits), so
  // floor((sum * 2^(22-bits) + 2^21) / 2^22) = floor((sum + 2^(bits-1)) / 2^bits): the 22-bit
  // kernels compute torch's bytes.
  int bits = kResamplePrecisionBits;
  if (filter == ResizeFilter::kBicubicTorch) {
    for (bits = 0; bits < kResamplePrecisionBits; ++bits) {
      if (static_cast<int>(0.5 + max_weight * (1 << (bits + 1))) >= (1 << 15)) break;
    }
  }
  const int widen = kResamplePrecisionBits - bits;
  for (std::size_t i = 0; i < kk.size(); ++i) {
    const double v = kk[i] * (1 << bits);
    const int rounded = kk[i] < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v);
    c.k[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(rounded) << widen);
  }
  return c;
}

bool horizontal_first(int in_w, int in_h, int out_w, int out_h, ResizeFilter filter) {
  if (filter == ResizeFilter::kBicubicTorch) return true;
  // Pillow 12.2+: when the height shrinks by more than twice what the width does, the vertical
  // pass runs first (on whole rows) and the horizontal pass on its output.
  return !((in_h - out_h) > 0 && (in_h - out_h) > (in_w - out_w) * 2);
}

namespace {

// The horizontal pass from in_w to out_w samples per row, its coefficients and working memory
// made once per image.
class HorizontalPass {
 public:
  HorizontalPass(int in_w, int out_w, int channels, ResizeFilter filter, ImageKernel kernel)
      : in_w_(in_w),
        out_w_(out_w),
        channels_(channels),
        kernel_(kernel),
        c_(precompute_coefficients(in_w, out_w, filter)) {
    if (kernel == ImageKernel::kScalar || channels != 3) return;
#if MMFEED_X86_DOT
    byte_dot_ = kernel != ImageKernel::kPortable && dot::cpu_has_it() && dot::make_plan(c_, out_w, plan_);
    if (byte_dot_) {
      // Groups up to the last one any pixel reads; those past the image stay zero.
      columns_.assign(static_cast<std::size_t>((in_w + 3) / 4 + plan_.groups + 1) * 64, 0);
      return;
    }
#endif
    columns_.assign(static_cast<std::size_t>(in_w) * 16 + 64, 0);
  }

  // `rows` consecutive rows of in_w * channels bytes -> as many rows of out_w * channels.
  void run(const std::uint8_t* in, int rows, std::uint8_t* out) {
    const std::size_t in_stride = static_cast<std::size_t>(in_w_) * channels_;
    const std::size_t out_stride = static_cast<std::size_t>(out_w_) * channels_;
    if (kernel_ == ImageKernel::kScalar || channels_ != 3) {
      horizontal_scalar(in, in_w_, channels_, 0, rows, c_, out_w_, out);
      return;
    }
    // Five rows at a time (the last block repeats its last row where fewer are left).
    for (int y = 0; y < rows; y += 5) {
      const int n = std::min(5, rows - y);
      const std::uint8_t* src[5];
      for (int r = 0; r < 5; ++r) src[r] = in + static_cast<std::size_t>(y + std::min(r, n - 1)) * in_stride;
      std::uint8_t* outs[5];
      for (int r = 0; r < n; ++r) outs[r] = out + static_cast<std::size_t>(y + r) * out_stride;
#if MMFEED_X86_DOT
      if (byte_dot_) {
        dot::build_groups(src, in_w_, columns_.data());
        dot::block(columns_.data(), plan_, out_w_, outs, n);
        continue;
      }
#endif
      // Column x gets the five rows' pixel x: 4-byte moves, each next one overwriting the byte
      // the previous carried past its pixel (the last pixel of a row is copied exactly, so no
      // read goes past the image).
      std::uint8_t* dst = columns_.data();
      for (int x = 0; x + 1 < in_w_; ++x, dst += 16) {
        for (int r = 0; r < 5; ++r) std::memcpy(dst + r * 3, src[r] + static_cast<std::size_t>(x) * 3, 4);
      }
      for (int r = 0; r < 5; ++r) std::memcpy(dst + r * 3, src[r] + static_cast<std::size_t>(in_w_ - 1) * 3, 3);
      HWY_DYNAMIC_DISPATCH(HorizontalBlockRgb)
      (columns_.data(), c_.k.data(), c_.ksize, c_.first.data(), c_.count.data(), out_w_, outs, n);
    }
  }

 private:
  int in_w_;
  int out_w_;
  int channels_;
  ImageKernel kernel_;
  Coefficients c_;
  bool byte_dot_ = false;
#if MMFEED_X86_DOT
  dot::Plan plan_;
#endif
  std::vector<std::uint8_t> columns_;  // byte-dot groups, or the Highway kernel's 16-byte columns
};

void vertical_simd(const std::uint8_t* in, std::size_t stride, const Coefficients& c, int row_shift, int y0, int y1,
                   std::uint8_t* out, ImageKernel kernel) {
#if MMFEED_X86_DOT
  const bool byte_dot = kernel != ImageKernel::kPortable && dot::cpu_has_it();
#else
  (void)kernel;
#endif
  for (int y = y0; y < y1; ++y) {
    const std::uint8_t* base = in + static_cast<std::size_t>(c.first[y] - row_shift) * stride;
    const std::int32_t* k = &c.k[static_cast<std::size_t>(y) * c.ksize];
    std::uint8_t* dst = out + static_cast<std::size_t>(y) * stride;
#if MMFEED_X86_DOT
    if (byte_dot && dot::vertical_row(base, stride, k, c.count[y], dst)) continue;
#endif
    HWY_DYNAMIC_DISPATCH(VerticalRow)(base, k, c.count[y], stride, dst);
  }
}

// The vertical pass: `in` holds input rows first_row, first_row + 1, ... (`stride` bytes each,
// at least every row c reads for output rows y0 .. y1 - 1) -> those rows of `out` (`stride`
// bytes each).
void vertical_pass(const std::uint8_t* in, std::size_t stride, const Coefficients& c, int first_row, int y0, int y1,
                   std::uint8_t* out, ImageKernel kernel) {
  if (kernel == ImageKernel::kScalar) {
    vertical_scalar(in, stride, c, first_row, y0, y1, out);
  } else {
    vertical_simd(in, stride, c, first_row, y0, y1, out, kernel);
  }
}

}  // namespace

struct RowResampler::State {
  State(int in_w, int in_h, int out_w, int out_height, int channels, ResizeFilter filter, ImageKernel kernel_choice,
        std::uint8_t* out_pixels)
      : horizontal(in_w, out_w, channels, filter, kernel_choice),
        kernel(kernel_choice),
        out(out_pixels),
        out_h(out_height),
        out_stride(static_cast<std::size_t>(out_w) * channels),
        in_stride(static_cast<std::size_t>(in_w) * channels),
        last_row(in_h) {
    if (out_height == in_h) return;  // the horizontal pass writes the output itself
    vert = precompute_coefficients(in_h, out_height, filter);
    // Only the rows the vertical pass reads go through the horizontal pass.
    first_row = vert.first[0];
    last_row = vert.first[out_height - 1] + vert.count[out_height - 1];
    temp.resize(out_stride * (last_row - first_row));
  }

  HorizontalPass horizontal;
  ImageKernel kernel;
  std::uint8_t* out;
  int out_h;
  std::size_t out_stride;
  std::size_t in_stride;
  Coefficients vert;  // empty when the height does not change
  int first_row = 0;
  int last_row;
  int pushed_to = 0;  // input rows below this one went through the horizontal pass
  int done = 0;       // output rows written
  core::ScratchVector<std::uint8_t> temp;

  // The vertical pass for the output rows whose input rows have all been pushed.
  void advance() {
    int to = done;
    while (to < out_h && vert.first[to] + vert.count[to] <= pushed_to) ++to;
    if (to == done) return;
    vertical_pass(temp.data(), out_stride, vert, first_row, done, to, out, kernel);
    done = to;
  }
};

RowResampler::RowResampler(int in_w, int in_h, int out_w, int out_h, int channels, ResizeFilter filter,
                           ImageKernel kernel, std::uint8_t* out)
    : state_(std::make_unique<State>(in_w, in_h, out_w, out_h, channels, filter, kernel, out)) {}

RowResampler::~RowResampler() = default;

int RowResampler::first_row() const { return state_->first_row; }

void RowResampler::push(const std::uint8_t* rows, int y, int n) {
  State& s = *state_;
  const int from = std::max(y, s.first_row);
  const int to = std::min(y + n, s.last_row);
  if (from >= to) return;
  std::uint8_t* dst = s.vert.first.empty() ? s.out : s.temp.data();
  s.horizontal.run(rows + (from - y) * s.in_stride, to - from, dst + (from - s.first_row) * s.out_stride);
  s.pushed_to = to;
  if (!s.vert.first.empty()) s.advance();
}

void resample_u8(const std::uint8_t* in, int in_w, int in_h, int channels, std::uint8_t* out, int out_w, int out_h,
                 ResizeFilter filter, ImageKernel kernel) {
  const std::size_t in_stride = static_cast<std::size_t>(in_w) * channels;
  if (out_w == in_w && out_h == in_h) {
    std::memcpy(out, in, in_stride * in_h);
    return;
  }
  if (out_w == in_w) {
    vertical_pass(in, in_stride, precompute_coefficients(in_h, out_h, filter), 0, 0, out_h, out, kernel);
    return;
  }
  if (horizontal_first(in_w, in_h, out_w, out_h, filter)) {
    // In chunks, so that the vertical pass reads rows the horizontal pass has just written.
    constexpr int kChunk = 40;
    RowResampler rows(in_w, in_h, out_w, out_h, channels, filter, kernel, out);
    for (int y = 0; y < in_h; y += kChunk) rows.push(in + y * in_stride, y, std::min(kChunk, in_h - y));
    return;
  }
  core::ScratchVector<std::uint8_t> temp(in_stride * out_h);
  vertical_pass(in, in_stride, precompute_coefficients(in_h, out_h, filter), 0, 0, out_h, temp.data(), kernel);
  HorizontalPass(in_w, out_w, channels, filter, kernel).run(temp.data(), out_h, out);
}

}  // namespace mmfeed::vision

#endif  // HWY_ONCE
