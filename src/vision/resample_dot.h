// Resampling on byte dot products, for x86 CPUs with AVX-512 VBMI and VNNI: the horizontal pass
// for RGB and the vertical pass for any channels, computing Pillow's 32-bit sums exactly (the
// reference kernels in resample.cc are the oracle; tests run them against each other).
//
// The horizontal pass for RGB on CPUs with AVX-512 VBMI and VNNI, five rows at a time. Input:
// for every fourth input column 4m a 64-byte group Q_m whose 32-bit lane j (j = 3 * row + channel,
// lane 15 zero) holds that sample at columns 4m .. 4m + 3. Each output pixel starts at the group
// holding its first tap, its coefficients shifted by first % 4 and padded with zeros to whole
// groups; every coefficient k is split into three signed bytes, k = d0 + 256 d1 + 65536 d2, so
// that one VPDPBUSD per digit and group adds four taps' unsigned-sample x signed-byte products,
// and acc0 + (acc1 << 8) + (acc2 << 16) is Pillow's 32-bit sum exactly (modulo 2^32, and the sum
// fits in 32 bits). Output pixels go out four at a time: packed to bytes together, then byte
// permutes turn their 4 x 15 results into five rows of 12 bytes.
//
// Example (resample.cc):
//   dot::Plan plan;
//   if (dot::cpu_has_it() && dot::make_plan(coefficients, out_w, plan)) {
//     dot::build_groups(five_rows, in_w, groups);
//     dot::block(groups, plan, out_w, five_out_rows, 5);
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vision/resample.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define MMFEED_X86_DOT 1
#include <immintrin.h>
#endif

namespace mmfeed::vision {

// Pillow's fixed point: coefficients scaled by 2^22 (32 bits less 8 for a sample, 2 for headroom).
constexpr int kResamplePrecisionBits = 32 - 8 - 2;

#if MMFEED_X86_DOT
namespace dot {

// Whether this CPU has AVX-512 F, BW, VBMI and VNNI.
bool cpu_has_it();

// The horizontal pass's coefficients as signed-byte digits, grouped four taps at a time.
struct Plan {
  int groups = 0;                   // coefficient groups of four taps per output pixel
  std::vector<int> start;           // the group index (first tap / 4) per output pixel
  std::vector<int> used;            // groups holding taps, per output pixel
  std::vector<std::int32_t> words;  // [pixel][group][digit]: four signed bytes, one per tap
};

// False when a coefficient does not fit three signed bytes (never for Pillow's filters).
bool make_plan(const Coefficients& c, int out_w, Plan& plan);

// Groups Q_m for m in [0, ceil(in_w / 4)) from five RGB rows `src`; columns past in_w are zero.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void build_groups(const std::uint8_t* const* src, int in_w,
                                                                         std::uint8_t* q);

// One block of up to five rows from the groups `q`: out[r] for r < n_rows, out_w RGB pixels each.
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni"))) void block(const std::uint8_t* q, const Plan& plan,
                                                                             int out_w, std::uint8_t* const* out,
                                                                             int n_rows);

// One output row of the vertical pass: `taps` rows from `base`, `stride` bytes apart, weighted by
// k. False when a coefficient does not fit (the caller then runs the portable kernel).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) bool vertical_row(const std::uint8_t* base, std::size_t stride,
                                                                         const std::int32_t* k, int taps,
                                                                         std::uint8_t* out);

}  // namespace dot
#endif

}  // namespace mmfeed::vision
