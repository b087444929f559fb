// Pillow-exact resampling of 8-bit images (Pillow's Resample.c semantics, reproduced bit for
// bit): separable convolution, the support widened by the scale when shrinking (Pillow's
// antialiasing), coefficients normalised and rounded to 22-bit fixed point, the horizontal pass
// first into an 8-bit intermediate holding only the rows the vertical pass reads (vertical
// first instead when the height shrinks by more than twice the width, as Pillow >= 12.2 does),
// an axis whose size does not change skipped.
//
// The kernels compute the same integers: a scalar reference, Highway SIMD kernels chosen at
// run time for the CPU, and on x86 CPUs with AVX-512 VBMI and VNNI passes built on byte dot
// products (each 22-bit coefficient split into three signed bytes: the horizontal pass for RGB,
// the vertical pass for any channels); tests run them against each other and against Pillow.
//
// Example:
//   std::vector<uint8_t> out(756 * 1036 * 3);
//   resample_u8(img.pixels.data(), img.width, img.height, 3, out.data(), 1036, 756, ResizeFilter::kBicubic);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mmfeed/choices.h"

namespace mmfeed::vision {

// kBicubicTorch: torch's antialiased bicubic on uint8 tensors (F.interpolate(mode="bicubic",
// antialias=True), what torchvision's resize and so transformers' video processors run): the
// taps and weights of Pillow's bicubic (torch's form of the polynomial), rounded to int16 at the
// precision torch picks per axis, horizontal pass always first. Differs from kBicubic by one
// or two levels in about 0.5% of the bytes.
using ::mmfeed::ResizeFilter;  // (mmfeed/choices.h)

// The fixed-point coefficients of one axis: for output index i, `count[i]` taps starting at
// input index `first[i]`, weights k[i * ksize + t] scaled by 2^22 (torch's, rounded at fewer
// bits, then scaled to 22).
struct Coefficients {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<std::int32_t> k;
};

Coefficients precompute_coefficients(int in_size, int out_size, ResizeFilter filter);

// kAuto = kSimd: the fastest kernels this CPU runs; kPortable: the Highway kernels only (no
// byte-dot passes); kScalar: the reference.
using ::mmfeed::ImageKernel;  // (mmfeed/choices.h)

// Resamples `in` (in_h rows of in_w * channels bytes, channels 1-4, tightly packed) to
// out_w x out_h into `out` (tightly packed).
void resample_u8(const std::uint8_t* in, int in_w, int in_h, int channels, std::uint8_t* out, int out_w, int out_h,
                 ResizeFilter filter, ImageKernel kernel = ImageKernel::kAuto);

// Pillow's order (torch's for kBicubicTorch): true when the horizontal pass runs first.
bool horizontal_first(int in_w, int in_h, int out_w, int out_h, ResizeFilter filter);

// resample_u8 fed its input rows in order as they are produced (a streaming decoder), for the
// shapes Pillow resamples horizontally first with a width change (horizontal_first() and
// out_w != in_w): each chunk goes through the horizontal pass at once, into an intermediate of
// output-width rows (or straight into `out` when the height does not change), and each output
// row goes through the vertical pass as soon as its input rows have arrived, while they are
// still in cache. Once every row was pushed, `out` holds resample_u8's bytes.
//
// Example:
//   RowResampler r(in_w, in_h, out_w, out_h, 3, ResizeFilter::kBicubic, ImageKernel::kAuto, out);
//   for (each chunk of n rows starting at row y, in order) r.push(chunk, y, n);
class RowResampler {
 public:
  RowResampler(int in_w, int in_h, int out_w, int out_h, int channels, ResizeFilter filter, ImageKernel kernel,
               std::uint8_t* out);
  ~RowResampler();
  RowResampler(const RowResampler&) = delete;
  RowResampler& operator=(const RowResampler&) = delete;

  // The first input row the output depends on: rows above it may be skipped.
  int first_row() const;
  // Rows y .. y + n - 1 (in_w * channels bytes each); rows outside the ones the output depends
  // on are ignored.
  void push(const std::uint8_t* rows, int y, int n);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The SIMD target the kAuto kernel uses on this CPU ("AVX2", "AVX3", "SSE4", ...).
const char* simd_target();

}  // namespace mmfeed::vision
