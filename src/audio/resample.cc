#include "audio/resample.h"

#include <soxr.h>

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
  // librosa: ratio = float(target_sr) / orig_sr; n_samples = int(np.ceil(n * ratio)).
  const double ratio = static_cast<double>(to_rate) / from_rate;
  const auto wanted = static_cast<std::size_t>(std::ceil(static_cast<double>(samples.size()) * ratio));
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
  std::size_t used = 0, made = 0;
  error = soxr_process(soxr.get(), samples.data(), samples.size(), &used, out.data(), out.size(), &made);
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
