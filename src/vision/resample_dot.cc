// The byte-dot resampling kernels declared in resample_dot.h.
#include "vision/resample_dot.h"

#if MMFEED_X86_DOT

#include <algorithm>
#include <array>
#include <cstring>

// GCC 12 reports its own _mm512_slli_epi32 (an "undefined" source register) as maybe
// uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace mmfeed::vision::dot {

bool cpu_has_it() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
  return yes;
}

namespace {

// Adds coefficient k as tap `slot` (0-3) of a group's three digit words: k = d0 + 256 d1 +
// 65536 d2 in signed bytes, d_i at byte `slot` of w[i]. False when k does not fit (never for
// Pillow's 22-bit coefficients).
bool add_digits(std::int32_t k, int slot, std::int32_t* w) {
  const std::int32_t d0 = static_cast<std::int8_t>(k & 0xFF);
  const std::int32_t k1 = (k - d0) >> 8;
  const std::int32_t d1 = static_cast<std::int8_t>(k1 & 0xFF);
  const std::int32_t d2 = (k1 - d1) >> 8;
  if (d2 < -128 || d2 > 127) return false;
  const int bit = slot * 8;
  w[0] |= static_cast<std::int32_t>(static_cast<std::uint32_t>(d0 & 0xFF) << bit);
  w[1] |= static_cast<std::int32_t>(static_cast<std::uint32_t>(d1 & 0xFF) << bit);
  w[2] |= static_cast<std::int32_t>(static_cast<std::uint32_t>(d2 & 0xFF) << bit);
  return true;
}

}  // namespace

// False when a coefficient does not fit three signed bytes (never for Pillow's filters).
bool make_plan(const Coefficients& c, int out_w, Plan& plan) {
  int span = 0;
  for (int x = 0; x < out_w; ++x) span = std::max(span, c.first[x] % 4 + c.count[x]);
  plan.groups = (span + 3) / 4;
  plan.start.resize(out_w);
  plan.used.resize(out_w);
  plan.words.assign(static_cast<std::size_t>(out_w) * plan.groups * 3, 0);
  for (int x = 0; x < out_w; ++x) {
    plan.start[x] = c.first[x] / 4;
    const int shift = c.first[x] % 4;
    plan.used[x] = (shift + c.count[x] + 3) / 4;
    for (int t = 0; t < c.count[x]; ++t) {
      const int pos = shift + t;
      if (!add_digits(c.k[static_cast<std::size_t>(x) * c.ksize + t], pos % 4,
                      &plan.words[(static_cast<std::size_t>(x) * plan.groups + pos / 4) * 3])) {
        return false;
      }
    }
  }
  return true;
}

// Groups Q_m for m in [0, ceil(in_w / 4)) from five rows; columns past in_w are zero.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void build_groups(const std::uint8_t* const* src, int in_w,
                                                                         std::uint8_t* q) {
  // Group d of a 16-pixel stretch: byte 4j + u (j = 3r + ch) <- the row's byte 3 (4d + u) + ch.
  alignas(64) static const auto kIndex = [] {
    std::array<std::array<std::uint8_t, 64>, 4> idx{};
    for (int d = 0; d < 4; ++d) {
      for (int r = 0; r < 5; ++r) {
        for (int ch = 0; ch < 3; ++ch) {
          for (int u = 0; u < 4; ++u) idx[d][4 * (3 * r + ch) + u] = static_cast<std::uint8_t>(3 * (4 * d + u) + ch);
        }
      }
    }
    return idx;
  }();
  __m512i index[4];
  for (int d = 0; d < 4; ++d) index[d] = _mm512_load_si512(kIndex[d].data());
  int x = 0;
  for (; 3 * x + 64 <= 3 * in_w; x += 16) {  // the 64-byte loads stay inside the rows
    __m512i row[5];
    for (int r = 0; r < 5; ++r) row[r] = _mm512_loadu_si512(src[r] + static_cast<std::size_t>(x) * 3);
    for (int d = 0; d < 4; ++d) {
      __m512i v = _mm512_maskz_permutexvar_epi8(__mmask64{0xFFF}, index[d], row[0]);
      for (int r = 1; r < 5; ++r) v = _mm512_mask_permutexvar_epi8(v, __mmask64{0xFFF} << (12 * r), index[d], row[r]);
      _mm512_storeu_si512(q + (static_cast<std::size_t>(x) / 4 + d) * 64, v);
    }
  }
  for (int m = x / 4; m < (in_w + 3) / 4; ++m) {
    std::uint8_t* g = q + static_cast<std::size_t>(m) * 64;
    std::memset(g, 0, 64);
    for (int u = 0; u < 4 && 4 * m + u < in_w; ++u) {
      for (int r = 0; r < 5; ++r) {
        for (int ch = 0; ch < 3; ++ch) g[4 * (3 * r + ch) + u] = src[r][static_cast<std::size_t>(4 * m + u) * 3 + ch];
      }
    }
  }
}

namespace {

// Pillow's sum for output pixel x, shifted down (not yet clamped): 16 x int32, lane j = 3r + ch.
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni"))) inline __m512i output_pixel(const std::uint8_t* q,
                                                                                              const Plan& plan, int x) {
  __m512i acc0 = _mm512_set1_epi32(1 << (kResamplePrecisionBits - 1));
  __m512i acc1 = _mm512_setzero_si512(), acc2 = acc1;
  const std::uint8_t* g = q + static_cast<std::size_t>(plan.start[x]) * 64;
  const std::int32_t* w = &plan.words[static_cast<std::size_t>(x) * plan.groups * 3];
  for (int i = 0; i < plan.used[x]; ++i, g += 64, w += 3) {
    const __m512i v = _mm512_loadu_si512(g);
    acc0 = _mm512_dpbusd_epi32(acc0, v, _mm512_set1_epi32(w[0]));
    acc1 = _mm512_dpbusd_epi32(acc1, v, _mm512_set1_epi32(w[1]));
    acc2 = _mm512_dpbusd_epi32(acc2, v, _mm512_set1_epi32(w[2]));
  }
  const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(acc0, _mm512_slli_epi32(acc1, 8)), _mm512_slli_epi32(acc2, 16));
  return _mm512_srai_epi32(sum, kResamplePrecisionBits);
}

}  // namespace

// One block of up to five rows: out[r] for r < n_rows.
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni"))) void block(const std::uint8_t* q, const Plan& plan,
                                                                             int out_w, std::uint8_t* const* out,
                                                                             int n_rows) {
  // Four pixels' sums packed with unsigned saturation (32 -> 16 -> 8 bits, which clamps to
  // 0..255) leave pixel i's lane j at byte 16 (j / 4) + 4 i + j % 4. One permute gathers rows
  // 0-3 (row r's 12 bytes at 16 r), a second row 4 (at 0).
  alignas(64) static const auto kRows = [] {
    std::array<std::array<std::uint8_t, 64>, 2> idx{};
    for (int r = 0; r < 5; ++r) {
      for (int i = 0; i < 4; ++i) {
        for (int ch = 0; ch < 3; ++ch) {
          const int j = 3 * r + ch;
          idx[r / 4][16 * (r % 4) + 3 * i + ch] = static_cast<std::uint8_t>(16 * (j / 4) + 4 * i + j % 4);
        }
      }
    }
    return idx;
  }();
  const __m512i rows03 = _mm512_load_si512(kRows[0].data());
  const __m512i row4 = _mm512_load_si512(kRows[1].data());
  for (int x = 0; x < out_w; x += 4) {
    const int n = std::min(4, out_w - x);
    const __m512i s0 = output_pixel(q, plan, x);
    const __m512i s1 = output_pixel(q, plan, std::min(x + 1, out_w - 1));
    const __m512i s2 = output_pixel(q, plan, std::min(x + 2, out_w - 1));
    const __m512i s3 = output_pixel(q, plan, std::min(x + 3, out_w - 1));
    const __m512i bytes = _mm512_packus_epi16(_mm512_packus_epi32(s0, s1), _mm512_packus_epi32(s2, s3));
    alignas(64) std::uint8_t lanes[80];
    _mm512_store_si512(lanes, _mm512_permutexvar_epi8(rows03, bytes));
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes + 64),
                    _mm512_castsi512_si128(_mm512_permutexvar_epi8(row4, bytes)));
    // 16-byte moves where the four bytes past the 12 land on the next group's pixels.
    const std::size_t at = static_cast<std::size_t>(x) * 3;
    if (at + 16 <= static_cast<std::size_t>(out_w) * 3) {
      for (int r = 0; r < n_rows; ++r) std::memcpy(out[r] + at, lanes + 16 * r, 16);
    } else {
      for (int r = 0; r < n_rows; ++r) std::memcpy(out[r] + at, lanes + 16 * r, 3 * n);
    }
  }
}

// One output row of the vertical pass on byte dot products: the taps in groups of four rows,
// whose bytes are interleaved so that each 32-bit lane holds one column's four samples
// (VPUNPCK*, within 128-bit lanes), then one VPDPBUSD per digit as in the horizontal pass.
// Per 128-bit lane the four interleaved vectors hold columns 0-3, 4-7, 8-11 and 12-15, so the
// packed sums come out in column order. vertical_block does 64 columns from column i (`mask`
// picks the columns of a last partial block; plain loads and stores otherwise, masked ones
// being slow on some CPUs).
namespace {

constexpr std::size_t kPrefetch = 512;  // bytes ahead in each row

template <bool kMasked>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline void vertical_block(const std::uint8_t* base,
                                                                                  std::size_t stride, int taps,
                                                                                  const std::int32_t* words, int groups,
                                                                                  std::size_t i, __mmask64 mask,
                                                                                  std::uint8_t* out) {
  __m512i acc[4][3];
  for (int j = 0; j < 4; ++j) {
    acc[j][0] = _mm512_set1_epi32(1 << (kResamplePrecisionBits - 1));
    acc[j][1] = _mm512_setzero_si512();
    acc[j][2] = acc[j][1];
  }
  for (int g = 0; g < groups; ++g) {
    const std::uint8_t* r[4];
    for (int k = 0; k < 4; ++k) r[k] = base + static_cast<std::size_t>(std::min(4 * g + k, taps - 1)) * stride;
    // Each step takes a whole cache line from every row it reads, faster than the hardware
    // prefetcher follows that many rows: rows read from memory (the whole-image paths) went
    // at half the Highway kernel's speed without this (1148x3000 -> 840: 2.2 -> 1.2 ms).
    for (int k = 0; k < 4; ++k) _mm_prefetch(reinterpret_cast<const char*>(r[k] + i + kPrefetch), _MM_HINT_T0);
    __m512i a, b, c, d;
    if constexpr (kMasked) {
      a = _mm512_maskz_loadu_epi8(mask, r[0] + i);
      b = _mm512_maskz_loadu_epi8(mask, r[1] + i);
      c = _mm512_maskz_loadu_epi8(mask, r[2] + i);
      d = _mm512_maskz_loadu_epi8(mask, r[3] + i);
    } else {
      a = _mm512_loadu_si512(r[0] + i);
      b = _mm512_loadu_si512(r[1] + i);
      c = _mm512_loadu_si512(r[2] + i);
      d = _mm512_loadu_si512(r[3] + i);
    }
    const __m512i ab_lo = _mm512_unpacklo_epi8(a, b), ab_hi = _mm512_unpackhi_epi8(a, b);
    const __m512i cd_lo = _mm512_unpacklo_epi8(c, d), cd_hi = _mm512_unpackhi_epi8(c, d);
    const __m512i q[4] = {_mm512_unpacklo_epi16(ab_lo, cd_lo), _mm512_unpackhi_epi16(ab_lo, cd_lo),
                          _mm512_unpacklo_epi16(ab_hi, cd_hi), _mm512_unpackhi_epi16(ab_hi, cd_hi)};
    for (int digit = 0; digit < 3; ++digit) {
      const __m512i w = _mm512_set1_epi32(words[g * 3 + digit]);
      for (int j = 0; j < 4; ++j) acc[j][digit] = _mm512_dpbusd_epi32(acc[j][digit], q[j], w);
    }
  }
  __m512i sum[4];
  for (int j = 0; j < 4; ++j) {
    sum[j] = _mm512_srai_epi32(_mm512_add_epi32(_mm512_add_epi32(acc[j][0], _mm512_slli_epi32(acc[j][1], 8)),
                                                _mm512_slli_epi32(acc[j][2], 16)),
                               kResamplePrecisionBits);
  }
  // Unsigned saturation clamps to 0..255 (the sums are far inside the 16-bit range).
  const __m512i bytes = _mm512_packus_epi16(_mm512_packus_epi32(sum[0], sum[1]), _mm512_packus_epi32(sum[2], sum[3]));
  if constexpr (kMasked) {
    _mm512_mask_storeu_epi8(out + i, mask, bytes);
  } else {
    _mm512_storeu_si512(out + i, bytes);
  }
}

}  // namespace

// `words`: [group][digit] (add_digits); rows past `taps` in the last group have zero
// coefficients and repeat the last row. False when a coefficient does not fit (the caller then
// runs the portable kernel).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) bool vertical_row(const std::uint8_t* base, std::size_t stride,
                                                                         const std::int32_t* k, int taps,
                                                                         std::uint8_t* out) {
  constexpr int kMaxGroups = 64;
  const int groups = (taps + 3) / 4;
  if (groups > kMaxGroups) return false;
  std::int32_t words[kMaxGroups * 3] = {};
  for (int t = 0; t < taps; ++t) {
    if (!add_digits(k[t], t % 4, &words[(t / 4) * 3])) return false;
  }
  std::size_t i = 0;
  for (; i + 64 <= stride; i += 64) vertical_block<false>(base, stride, taps, words, groups, i, 0, out);
  if (i < stride) vertical_block<true>(base, stride, taps, words, groups, i, (__mmask64{1} << (stride - i)) - 1, out);
  return true;
}

}  // namespace mmfeed::vision::dot
#pragma GCC diagnostic pop

#endif
