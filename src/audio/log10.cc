#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "audio/log10.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// After highway.h, once per target (clang-format keeps the blank line's groups apart).

#include <hwy/contrib/math/math-inl.h>

#ifndef MMFEED_AUDIO_LOG10_COMMON_
#define MMFEED_AUDIO_LOG10_COMMON_

#include <algorithm>
#include <cmath>

#include "audio/log10.h"

#endif  // MMFEED_AUDIO_LOG10_COMMON_

HWY_BEFORE_NAMESPACE();
namespace mmfeed::audio::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void Log10Floored(float* values, std::size_t n) {
  const hn::ScalableTag<float> d;
  const std::size_t lanes = hn::Lanes(d);
  const auto floor = hn::Set(d, 1e-10f);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::Log10(d, hn::Max(hn::LoadU(d, values + i), floor)), d, values + i);
  }
  for (; i < n; ++i) values[i] = std::log10(std::max(values[i], 1e-10f));
}

}  // namespace mmfeed::audio::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace mmfeed::audio {

HWY_EXPORT(Log10Floored);

void log10_floored(float* values, std::size_t n, bool simd) {
  if (simd) {
    HWY_DYNAMIC_DISPATCH(Log10Floored)(values, n);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) values[i] = std::log10(std::max(values[i], 1e-10f));
}

}  // namespace mmfeed::audio

#endif  // HWY_ONCE
