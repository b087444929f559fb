// Pillow-exact resampling of 8-bit images (Pillow's Resample.c semantics, reproduced bit for
// bit): separable convolution, the support widened by the scale when shrinking (Pillow's
// antialiasing), coefficients normalised and rounded to 22-bit fixed point, the horizontal pass
// first into an 8-bit intermediate holding only the rows the vertical pass reads (vertical
// first instead when the height shrinks by more than twice the width, as Pillow >= 12.2 does),
// an axis whose size does not change skipped.
//
// The kernels compute the same integers: a scalar reference, Highway SIMD kernels chosen at
// run time for the CPU, and on x86 CPUs with AVX-512 VBMI and VNNI a horizontal pass for RGB
// built on byte dot products (each 22-bit coefficient split into three signed bytes); tests run
// them against each other and against Pillow.
//
// Example:
//   std::vector<uint8_t> out(756 * 1036 * 3);
//   resample_u8(img.pixels.data(), img.width, img.height, 3, out.data(), 1036, 756, Filter::kBicubic);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mmfeed::vision {

enum class Filter { kBox, kBilinear, kHamming, kBicubic, kLanczos };

// The fixed-point coefficients of one axis: for output index i, `count[i]` taps starting at
// input index `first[i]`, weights k[i * ksize + t] scaled by 2^22.
struct Coefficients {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<std::int32_t> k;
};

Coefficients precompute_coefficients(int in_size, int out_size, Filter filter);

// kAuto = kSimd: the fastest kernels this CPU runs; kPortable: the Highway kernels only (no
// byte-dot pass); kScalar: the reference.
enum class Kernel { kAuto, kScalar, kSimd, kPortable };

// Resamples `in` (in_h rows of in_w * channels bytes, channels 1-4, tightly packed) to
// out_w x out_h into `out` (tightly packed).
void resample_u8(const std::uint8_t* in, int in_w, int in_h, int channels, std::uint8_t* out, int out_w, int out_h,
                 Filter filter, Kernel kernel = Kernel::kAuto);

// The passes one by one, for callers that produce the input as a stream of rows (the JPEG
// decoder): resample_u8 is horizontal_first() ? HorizontalPass over the rows the vertical
// coefficients read, then vertical_pass : the other way round.
//
// Example (rows arriving in chunks):
//   HorizontalPass h(in_w, out_w, 3, Filter::kBicubic);
//   h.run(chunk, chunk_rows, temp + row_offset * out_w * 3);   // for each chunk, in order
//   vertical_pass(temp, out_w * 3, precompute_coefficients(in_h, out_h, filter), first_row, out_h, out);

// Pillow's order: true when the horizontal pass runs first.
bool horizontal_first(int in_w, int in_h, int out_w, int out_h);

// The horizontal pass from in_w to out_w samples per row, its coefficients and working memory
// made once per image.
class HorizontalPass {
 public:
  HorizontalPass(int in_w, int out_w, int channels, Filter filter, Kernel kernel = Kernel::kAuto);
  ~HorizontalPass();
  HorizontalPass(HorizontalPass&&) noexcept;
  HorizontalPass& operator=(HorizontalPass&&) noexcept;

  // `rows` consecutive rows of in_w * channels bytes -> as many rows of out_w * channels.
  void run(const std::uint8_t* in, int rows, std::uint8_t* out);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The vertical pass: `in` holds input rows first_row, first_row + 1, ... (`stride` bytes each,
// at least every row c reads) -> c.first.size() = out_h rows of `stride` bytes.
void vertical_pass(const std::uint8_t* in, std::size_t stride, const Coefficients& c, int first_row, int out_h,
                   std::uint8_t* out, Kernel kernel = Kernel::kAuto);

// The SIMD target the kAuto kernel uses on this CPU ("AVX2", "AVX3", "SSE4", ...).
const char* simd_target();

}  // namespace mmfeed::vision
