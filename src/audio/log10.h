// log10(max(x, 1e-10)) over float32 values, in place: the extractor's log step. A Highway kernel
// (within 2 ulp of the correctly rounded value, as hwy's Log10 promises) and its scalar reference
// (the C library's log10f); tests/audio/audio_test.cc runs both.
#pragma once

#include <cstddef>

namespace mmfeed::audio {

void log10_floored(float* values, std::size_t n, bool simd = true);

}  // namespace mmfeed::audio
