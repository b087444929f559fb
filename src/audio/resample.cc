#include "audio/resample.h"

#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "audio/decode.h"

namespace mmfeed::audio {

namespace {
struct SoxrCloser {
  void operator()(soxr_t s) const { soxr_delete(s); }
};
}  // namespace

Result<std::vector<float>> resample(std::span<const float> samples, int from_rate, int to_rate) {
  if (from_rate <= 0 || to_rate <= 0 || from_rate > kMaxSampleRate || to_rate > kMaxSampleRate) {
    return Error(ErrorCode::kInvalidArgument, "resample: sample rates must be 1 to " + std::to_string(kMaxSampleRate) +
                                                  " Hz, not " + std::to_string(from_rate) + " -> " +
                                                  std::to_string(to_rate));
  }
  if (from_rate == to_rate) return std::vector<float>(samples.begin(), samples.end());
  const std::size_t wanted = resampled_length(samples.size(), from_rate, to_rate);
  soxr_error_t error = nullptr;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  std::unique_ptr<soxr, SoxrCloser> soxr(soxr_create(from_rate, to_rate, 1, &error, &io, &quality, nullptr));
  if (error != nullptr || !soxr) {
    return Error(ErrorCode::kResourceExhausted,
                 std::string("resample: libsoxr refused (") + (error ? error : "") + ")");
  }
  // Room for what the input and the flush make: libsoxr yields at most ceil(n * ratio) + a few.
  std::vector<float> out(wanted + 64);
  // The input in pieces: libsoxr queues what one call gives it in a buffer it grows without
  // checking the allocation (a clip of gigabytes crashed it), and the same stream in pieces
  // makes the same samples.
  constexpr std::size_t kPiece = std::size_t{1} << 16;
  std::size_t made = 0;
  for (std::size_t at = 0; at < samples.size() && error == nullptr;) {
    const std::size_t piece = std::min(kPiece, samples.size() - at);
    std::size_t used = 0, produced = 0;
    error =
        soxr_process(soxr.get(), samples.data() + at, piece, &used, out.data() + made, out.size() - made, &produced);
    at += used;
    made += produced;
    if (error == nullptr && used == 0 && produced == 0) error = "no progress";
  }
  std::size_t flushed = 0;
  if (error == nullptr) {
    error = soxr_process(soxr.get(), nullptr, 0, nullptr, out.data() + made, out.size() - made, &flushed);
  }
  if (error != nullptr) return Error(ErrorCode::kInternal, std::string("resample: libsoxr failed (") + error + ")");
  out.resize(made + flushed);
  out.resize(wanted, 0.0f);
  return out;
}

}  // namespace mmfeed::audio
