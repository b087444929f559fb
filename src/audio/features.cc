#include "audio/features.h"

#include <fftw3.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "audio/log10.h"

namespace mmfeed::audio {

namespace {

constexpr int kBins = kFftSize / 2 + 1;  // 201

// torch.hann_window(400) (periodic) as torch 2.13 computes it in float32: its values differ from
// a float64 formula's rounding in the last bit, and the reference windows with these.
constexpr std::array<float, kFftSize> kHann = {
    0.0f,           6.16908073e-05f, 0.000246733427f, 0.000555068254f, 0.000986635685f,
    0.00154134631f, 0.00221902132f,  0.0030195117f,   0.00394263864f,  0.00498816371f,
    0.0061558187f,  0.00744533539f,  0.00885638595f,  0.0103885829f,   0.0120416284f,
    0.0138150454f,  0.0157084167f,   0.0177212954f,   0.0198531449f,   0.0221034884f,
    0.02447173f,    0.0269573331f,   0.0295596123f,   0.0322780013f,   0.0351117551f,
    0.0380602479f,  0.0411226749f,   0.0442983806f,   0.0475864708f,   0.0509862304f,
    0.0544967353f,  0.0581171811f,   0.0618466735f,   0.0656842589f,   0.0696289837f,
    0.073679924f,   0.0778360665f,   0.0820963383f,   0.0864597261f,   0.0909251571f,
    0.0954914987f,  0.100157678f,    0.104922503f,    0.109784812f,    0.114743382f,
    0.119797021f,   0.124944478f,    0.130184472f,    0.13551572f,     0.140936852f,
    0.146446615f,   0.152043611f,    0.157726467f,    0.163493752f,    0.169344097f,
    0.175276011f,   0.181288034f,    0.187378705f,    0.193546504f,    0.199789882f,
    0.206107378f,   0.212497383f,    0.218958318f,    0.225488603f,    0.232086629f,
    0.238750756f,   0.245479316f,    0.252270699f,    0.259123206f,    0.26603514f,
    0.27300477f,    0.280030459f,    0.287110388f,    0.294242859f,    0.301426113f,
    0.308658302f,   0.315937728f,    0.323262572f,    0.330631047f,    0.338041306f,
    0.345491529f,   0.352979839f,    0.360504448f,    0.368063509f,    0.375655085f,
    0.383277357f,   0.390928417f,    0.39860639f,     0.406309366f,    0.414035499f,
    0.421782821f,   0.429549426f,    0.437333435f,    0.445132911f,    0.452945918f,
    0.460770518f,   0.468604803f,    0.476446778f,    0.484294623f,    0.492146373f,
    0.5f,           0.507853687f,    0.515705407f,    0.523553252f,    0.531395316f,
    0.539229572f,   0.547054172f,    0.554867208f,    0.562666655f,    0.570450664f,
    0.578217268f,   0.58596462f,     0.593690693f,    0.6013937f,      0.609071672f,
    0.616722763f,   0.624345005f,    0.63193661f,     0.639495552f,    0.647020221f,
    0.654508531f,   0.661958754f,    0.669368982f,    0.676737428f,    0.684062302f,
    0.691341758f,   0.698574007f,    0.70575726f,     0.712889671f,    0.71996963f,
    0.726995289f,   0.73396498f,     0.740876913f,    0.747729421f,    0.754520774f,
    0.761249304f,   0.767913461f,    0.774511456f,    0.781041741f,    0.787502706f,
    0.793892741f,   0.800210178f,    0.806453586f,    0.812621415f,    0.818712115f,
    0.824724078f,   0.830656052f,    0.836506367f,    0.842273593f,    0.847956479f,
    0.853553414f,   0.859063148f,    0.86448431f,     0.869815588f,    0.875055552f,
    0.880203009f,   0.885256648f,    0.890215218f,    0.895077527f,    0.899842381f,
    0.904508471f,   0.909074903f,    0.913540304f,    0.917903662f,    0.922163963f,
    0.926320076f,   0.930371046f,    0.934315801f,    0.938153386f,    0.941882849f,
    0.945503294f,   0.949013829f,    0.952413559f,    0.955701709f,    0.958877325f,
    0.961939812f,   0.964888275f,    0.967722058f,    0.970440388f,    0.973042727f,
    0.9755283f,     0.977896571f,    0.980146885f,    0.982278705f,    0.984291613f,
    0.986184955f,   0.987958431f,    0.989611387f,    0.991143644f,    0.992554665f,
    0.993844151f,   0.995011806f,    0.996057391f,    0.996980488f,    0.997780979f,
    0.998458624f,   0.999013364f,    0.999444962f,    0.999753237f,    0.999938309f,
    1.0f,           0.999938309f,    0.999753237f,    0.999444962f,    0.999013364f,
    0.998458624f,   0.997780979f,    0.996980429f,    0.996057332f,    0.995011806f,
    0.993844151f,   0.992554665f,    0.991143584f,    0.989611387f,    0.987958372f,
    0.986184955f,   0.984291553f,    0.982278705f,    0.980146825f,    0.977896452f,
    0.97552824f,    0.973042607f,    0.970440388f,    0.967721939f,    0.964888215f,
    0.961939692f,   0.958877265f,    0.95570159f,     0.95241344f,     0.94901371f,
    0.945503235f,   0.94188273f,     0.938153267f,    0.934315681f,    0.930370927f,
    0.926320076f,   0.922163963f,    0.917903662f,    0.913540244f,    0.909074783f,
    0.904508471f,   0.899842262f,    0.895077467f,    0.890215158f,    0.885256588f,
    0.880202949f,   0.875055492f,    0.869815469f,    0.864484251f,    0.859063089f,
    0.853553295f,   0.8479563f,      0.842273474f,    0.836506188f,    0.830655873f,
    0.824723959f,   0.818711877f,    0.812621236f,    0.806453466f,    0.800209999f,
    0.793892503f,   0.787502527f,    0.781041622f,    0.774511337f,    0.767913282f,
    0.761249185f,   0.754520595f,    0.747729182f,    0.740876734f,    0.733964801f,
    0.726995111f,   0.719969451f,    0.712889493f,    0.705757022f,    0.698573828f,
    0.691341579f,   0.684062123f,    0.676737249f,    0.669368804f,    0.661958575f,
    0.654508352f,   0.647019982f,    0.639495373f,    0.631936312f,    0.624344766f,
    0.616722465f,   0.609071434f,    0.601393461f,    0.593690455f,    0.585964322f,
    0.57821703f,    0.570450425f,    0.562666416f,    0.55486691f,     0.547053933f,
    0.539229333f,   0.531395018f,    0.523553014f,    0.515705168f,    0.507853627f,
    0.5f,           0.492146343f,    0.484294593f,    0.476446748f,    0.468604714f,
    0.460770428f,   0.452945828f,    0.445132822f,    0.437333345f,    0.429549336f,
    0.421782732f,   0.41403541f,     0.406309307f,    0.3986063f,      0.390928328f,
    0.383277267f,   0.375654995f,    0.36806342f,     0.360504389f,    0.352979779f,
    0.345491439f,   0.338041216f,    0.330630958f,    0.323262513f,    0.315937638f,
    0.308658183f,   0.301425993f,    0.29424274f,     0.287110269f,    0.28003031f,
    0.273004651f,   0.26603502f,     0.259123087f,    0.252270579f,    0.245479196f,
    0.238750607f,   0.232086509f,    0.225488484f,    0.218958199f,    0.212497264f,
    0.206107259f,   0.199789762f,    0.193546355f,    0.187378556f,    0.181287885f,
    0.175275862f,   0.169343948f,    0.163493633f,    0.157726318f,    0.152043492f,
    0.146446496f,   0.140936732f,    0.135515571f,    0.130184323f,    0.124944359f,
    0.119796902f,   0.114743263f,    0.109784693f,    0.104922384f,    0.100157559f,
    0.0954913795f,  0.0909250379f,   0.0864596069f,   0.0820962191f,   0.0778359175f,
    0.0736798048f,  0.0696288645f,   0.0656841397f,   0.0618465543f,   0.0581170917f,
    0.0544966459f,  0.0509861112f,   0.0475863814f,   0.0442982614f,   0.0411225855f,
    0.0380601287f,  0.0351116657f,   0.0322778821f,   0.0295595229f,   0.0269572437f,
    0.0244716704f,  0.022103399f,    0.0198530853f,   0.0177212059f,   0.0157083571f,
    0.0138150156f,  0.0120415986f,   0.0103885829f,   0.00885635614f,  0.00744533539f,
    0.0061558187f,  0.00498816371f,  0.00394263864f,  0.0030195117f,   0.00221902132f,
    0.00154131651f, 0.000986635685f, 0.000555068254f, 0.000246733427f, 6.16908073e-05f,
};

// transformers' audio_utils hertz_to_mel / mel_to_hertz, slaney scale: linear below 1 kHz,
// logarithmic above.
double hertz_to_mel(double hz) {
  if (hz >= 1000.0) return 15.0 + std::log(hz / 1000.0) * (27.0 / std::log(6.4));
  return 3.0 * hz / 200.0;
}
double mel_to_hertz(double mel) {
  if (mel >= 15.0) return 1000.0 * std::exp(std::log(6.4) / 27.0 * (mel - 15.0));
  return 200.0 * mel / 3.0;
}
// numpy.linspace's i-th of n values.
double linspace(double start, double stop, int n, int i) {
  if (i == n - 1) return stop;
  return i * ((stop - start) / (n - 1)) + start;
}

// mel_filter_bank(201, 128, 0, 8000, 16000, norm="slaney", mel_scale="slaney") in float64, cast
// to float32 as the torch path casts it; each mel bin's non-zero FFT bins.
struct MelFilters {
  std::array<std::array<double, kBins>, kMelBins> weight{};
  std::array<int, kMelBins> first{};
  std::array<int, kMelBins> last{};  // exclusive

  MelFilters() {
    std::array<double, kMelBins + 2> edges{};
    const double low = hertz_to_mel(0.0), high = hertz_to_mel(kFeatureRate / 2.0);
    for (int i = 0; i < kMelBins + 2; ++i) edges[i] = mel_to_hertz(linspace(low, high, kMelBins + 2, i));
    for (int m = 0; m < kMelBins; ++m) {
      const double norm = 2.0 / (edges[m + 2] - edges[m]);
      first[m] = kBins;
      last[m] = 0;
      for (int b = 0; b < kBins; ++b) {
        const double hz = linspace(0.0, kFeatureRate / 2, kBins, b);
        const double down = -(edges[m] - hz) / (edges[m + 1] - edges[m]);
        const double up = (edges[m + 2] - hz) / (edges[m + 2] - edges[m + 1]);
        const double w = static_cast<float>(std::max(0.0, std::min(down, up)) * norm);
        weight[m][b] = w;
        if (w != 0.0) {
          first[m] = std::min(first[m], b);
          last[m] = b + 1;
        }
      }
    }
  }
};

const MelFilters& mel_filters() {
  static const MelFilters filters;
  return filters;
}

// One FFTW plan for every thread: planning is not thread-safe, executing a plan on other
// (equally aligned: fftw_malloc) arrays is.
struct Plan {
  fftw_plan plan = nullptr;
  Plan() {
    double* in = fftw_alloc_real(kFftSize);
    fftw_complex* out = fftw_alloc_complex(kBins);
    plan = fftw_plan_dft_r2c_1d(kFftSize, in, out, FFTW_ESTIMATE);
    fftw_free(in);
    fftw_free(out);
  }
};
fftw_plan rfft_plan() {
  static std::mutex planning;
  std::lock_guard<std::mutex> lock(planning);
  static const Plan plan;
  return plan.plan;
}

struct FftBuffers {
  double* in = fftw_alloc_real(kFftSize);
  fftw_complex* out = fftw_alloc_complex(kBins);
  FftBuffers() = default;
  FftBuffers(const FftBuffers&) = delete;
  FftBuffers& operator=(const FftBuffers&) = delete;
  ~FftBuffers() {
    fftw_free(in);
    fftw_free(out);
  }
};

constexpr float kSilence = -10.0f;  // log10 of the 1e-10 floor: a frame of zeros

}  // namespace

std::int64_t valid_frames(std::size_t samples, std::size_t padded_length) {
  const auto ceil = static_cast<std::int64_t>((samples + kHop - 1) / kHop);
  return std::min(ceil, static_cast<std::int64_t>(frames_of(padded_length)));
}

void log_mel(std::span<const float> samples, std::size_t padded_length, std::size_t frames_out, float* out,
             std::size_t row_stride) {
  const MelFilters& filters = mel_filters();
  const fftw_plan plan = rfft_plan();
  const auto n = static_cast<std::int64_t>(samples.size());
  const auto length = static_cast<std::int64_t>(padded_length);
  const auto frames = static_cast<std::int64_t>(frames_of(padded_length));
  // Frame t windows padded positions [160 t - 200, 160 t + 200), reflected at both ends of the
  // padded clip; past `busy` every position it reads is padding (zeros): those frames are silence.
  const auto source = [&](std::int64_t j) {
    if (j < 0) j = -j;
    if (j >= length) j = 2 * (length - 1) - j;
    return j;
  };
  const auto reads_signal = [&](std::int64_t t) {
    const std::int64_t lo = t * kHop - kFftSize / 2, hi = lo + kFftSize - 1;
    if (n == 0) return false;
    if (lo < n) return true;                           // the clip itself (or its start's reflection)
    return hi >= length && 2 * (length - 1) - hi < n;  // the reflection of its end
  };
  std::int64_t busy = frames;
  while (busy > 0 && !reads_signal(busy - 1)) --busy;
  std::vector<float> spectrum(static_cast<std::size_t>(kMelBins) * static_cast<std::size_t>(busy));
  FftBuffers fft;
  std::array<double, kBins> power{};
  for (std::int64_t t = 0; t < busy; ++t) {
    const std::int64_t lo = t * kHop - kFftSize / 2;
    if (lo >= 0 && lo + kFftSize <= n) {  // inside the clip: no reflection, no padding
      const float* x = samples.data() + lo;
      for (int k = 0; k < kFftSize; ++k) fft.in[k] = static_cast<double>(x[k]) * kHann[k];
    } else {
      for (int k = 0; k < kFftSize; ++k) {
        const std::int64_t j = source(lo + k);
        fft.in[k] = j < n ? static_cast<double>(samples[static_cast<std::size_t>(j)]) * kHann[k] : 0.0;
      }
    }
    fftw_execute_dft_r2c(plan, fft.in, fft.out);
    for (int b = 0; b < kBins; ++b) power[b] = fft.out[b][0] * fft.out[b][0] + fft.out[b][1] * fft.out[b][1];
    for (int m = 0; m < kMelBins; ++m) {
      double mel = 0;
      for (int b = filters.first[m]; b < filters.last[m]; ++b) mel += filters.weight[m][b] * power[b];
      spectrum[static_cast<std::size_t>(t) * kMelBins + static_cast<std::size_t>(m)] = static_cast<float>(mel);
    }
  }
  // As the reference: the mel energies rounded to float32, floored at 1e-10, their log10.
  log10_floored(spectrum.data(), spectrum.size());
  float top = busy < frames ? kSilence : -INFINITY;
  for (float v : spectrum) top = std::max(top, v);
  const float floor = top - 8.0f;
  const auto scaled = [floor](float v) { return (std::max(v, floor) + 4.0f) / 4.0f; };
  const float silence = scaled(kSilence);
  // Frame-major to the extractor's mel-major rows, 16 frames at a time (the rows' cache lines
  // filled whole).
  const auto computed = std::min<std::size_t>(frames_out, static_cast<std::size_t>(busy));
  constexpr std::size_t kBlock = 16;
  for (std::size_t t0 = 0; t0 < computed; t0 += kBlock) {
    const std::size_t t1 = std::min(computed, t0 + kBlock);
    for (int m = 0; m < kMelBins; ++m) {
      float* row = out + static_cast<std::size_t>(m) * row_stride;
      for (std::size_t t = t0; t < t1; ++t) row[t] = scaled(spectrum[t * kMelBins + static_cast<std::size_t>(m)]);
    }
  }
  for (int m = 0; m < kMelBins; ++m) {
    float* row = out + static_cast<std::size_t>(m) * row_stride;
    std::fill(row + computed, row + frames_out, silence);
  }
}

}  // namespace mmfeed::audio
