// Binding of the audio API (mmfeed/audio.h): bytes or float32 arrays in, numpy out (the feature
// buffers handed over, no copy). Work runs with the GIL released.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "mmfeed/audio.h"
#include "python/bindings/errors.h"

namespace nb = nanobind;
using namespace mmfeed;
using python::value_or_raise;

namespace {

using F32Array = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

std::span<const std::byte> bytes_of(const nb::bytes& b) {
  return {reinterpret_cast<const std::byte*>(b.c_str()), b.size()};
}

// A numpy array owning `values` (moved to the heap), of `shape`.
template <class T>
nb::ndarray<nb::numpy, T> owned_array(std::vector<T>&& values, std::initializer_list<std::size_t> shape) {
  auto* owner = new std::vector<T>(std::move(values));
  nb::capsule capsule(owner, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owner->data(), shape, capsule);
}

class PyAudioProcessor {
 public:
  PyAudioProcessor(const std::string& model, const std::string& padding, double max_seconds, int threads) {
    const std::optional<AudioPadding> p = parse_choice<AudioPadding>(padding);
    if (!p)
      throw nb::value_error(("padding must be " + choice_list<AudioPadding>() + ", not '" + padding + "'").c_str());
    proc_.emplace(value_or_raise(
        AudioProcessor::create({.model = model, .padding = *p, .max_seconds = max_seconds, .threads = threads})));
  }

  // (input_features, feature_attention_mask) for a list of bytes / float32 arrays.
  nb::tuple process(nb::list items, std::vector<std::optional<double>> starts, std::vector<std::optional<double>> ends,
                    std::vector<bool> soundtracks) {
    const std::size_t n = nb::len(items);
    if (starts.size() != n || ends.size() != n || soundtracks.size() != n) {
      throw nb::value_error("starts, ends and soundtracks must match the clips");
    }
    std::vector<AudioInput> inputs(n);
    std::vector<nb::object> keep(n);  // the bytes and arrays the inputs point into
    for (std::size_t i = 0; i < n; ++i) {
      nb::handle h = items[i];
      keep[i] = nb::borrow(h);
      inputs[i].start = starts[i];
      inputs[i].end = ends[i];
      inputs[i].soundtrack = soundtracks[i];
      if (nb::isinstance<nb::bytes>(h)) {
        inputs[i].encoded = bytes_of(nb::borrow<nb::bytes>(h));
        continue;
      }
      const F32Array a = nb::cast<F32Array>(h);
      inputs[i].samples = {a.data(), a.shape(0)};
    }
    Result<AudioFeatures> r = Error(ErrorCode::kInternal, "unset");
    {
      nb::gil_scoped_release release;
      r = proc_->process(inputs);
    }
    AudioFeatures f = value_or_raise(std::move(r));
    auto features = owned_array(std::move(f.features), {f.clips, 128, f.frames});
    auto mask = owned_array(std::move(f.mask), {f.clips, f.frames});
    return nb::make_tuple(features, mask);
  }

  std::int64_t tokens(std::int64_t frames) const { return proc_->tokens(frames); }

 private:
  std::optional<AudioProcessor> proc_;
};

}  // namespace

void bind_audio(nb::module_& m) {
  nb::class_<PyAudioProcessor>(m, "_AudioProcessor")
      .def(nb::init<const std::string&, const std::string&, double, int>(), nb::arg("model"), nb::arg("padding"),
           nb::arg("max_seconds"), nb::arg("threads"))
      .def("process", &PyAudioProcessor::process, nb::arg("clips"), nb::arg("starts"), nb::arg("ends"),
           nb::arg("soundtracks"))
      .def("tokens", &PyAudioProcessor::tokens, nb::arg("frames"));
  m.def(
      "load_audio",
      [](nb::bytes data, int sampling_rate, std::optional<double> start, std::optional<double> end, double max_seconds,
         bool soundtrack) {
        Result<std::vector<float>> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = load_audio(bytes_of(data), {.sampling_rate = sampling_rate,
                                          .start = start,
                                          .end = end,
                                          .max_seconds = max_seconds,
                                          .soundtrack = soundtrack});
        }
        std::vector<float> samples = value_or_raise(std::move(r));
        const std::size_t size = samples.size();
        return owned_array(std::move(samples), {size});
      },
      nb::arg("data"), nb::arg("sampling_rate") = 16000, nb::arg("start").none() = nb::none(),
      nb::arg("end").none() = nb::none(), nb::arg("max_seconds") = 3600.0, nb::arg("soundtrack") = false,
      "Mono float32 samples at sampling_rate (0: the file's), as librosa.load(sr=..., offset, duration).");
  m.def(
      "resample_audio",
      [](F32Array samples, int from_rate, int to_rate) {
        Result<std::vector<float>> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = resample_audio({samples.data(), samples.shape(0)}, from_rate, to_rate);
        }
        std::vector<float> out = value_or_raise(std::move(r));
        const std::size_t size = out.size();
        return owned_array(std::move(out), {size});
      },
      nb::arg("samples"), nb::arg("from_rate"), nb::arg("to_rate"),
      "Mono float32 samples resampled as librosa.resample(res_type='soxr_hq').");
  m.def(
      "probe_audio",
      [](nb::bytes data) {
        const AudioInfo info = value_or_raise(probe_audio(bytes_of(data)));
        nb::dict d;
        d["sample_rate"] = info.sample_rate;
        d["channels"] = info.channels;
        d["duration_s"] = info.duration_s;
        d["codec"] = info.codec;
        d["container"] = info.container;
        return d;
      },
      nb::arg("data"), "The best audio stream's sample rate, channels, stated duration, codec and container.");
  m.def("audio_libraries", &audio_libraries, "The libraries audio is decoded, resampled and transformed with.");
}
