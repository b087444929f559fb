// Binding of the vision processor: numpy in, numpy out (pixel rows owned by a capsule, no
// copy). Work runs with the GIL released, images spread over a few threads.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <thread>
#include <vector>

#include "core/buffer_pool.h"
#include "vision/processor.h"
#include "vision/video.h"
#include "vision/video_processor.h"
#include "vision/video_sampling.h"

namespace nb = nanobind;
using namespace mmfeed;

namespace {

// "auto"/"simd": the fastest kernels the CPU runs; "portable": the Highway kernels only;
// "scalar": the reference.
vision::Kernel kernel_from(const std::string& name) {
  if (name == "auto") return vision::Kernel::kAuto;
  if (name == "simd") return vision::Kernel::kSimd;
  if (name == "portable") return vision::Kernel::kPortable;
  if (name == "scalar") return vision::Kernel::kScalar;
  throw nb::value_error("kernel must be 'auto', 'simd', 'portable' or 'scalar'");
}

[[noreturn]] void raise(const Error& e) { throw nb::value_error(e.to_string().c_str()); }

template <class T>
T unwrap(Result<T> r) {
  if (!r.ok()) raise(r.error());
  return std::move(r).value();
}

vision::AlphaPolicy alpha_policy(const std::string& s) {
  if (s == "drop") return vision::AlphaPolicy::kDrop;
  if (s == "paste") return vision::AlphaPolicy::kPaste;
  if (s == "composite") return vision::AlphaPolicy::kComposite;
  throw nb::value_error(("alpha must be 'drop', 'paste' or 'composite', not '" + s + "'").c_str());
}

// One input: encoded bytes, or pixels (h, w, c) uint8.
struct Input {
  vision::AlphaPolicy alpha = vision::AlphaPolicy::kDrop;
  std::string encoded;
  nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu> pixels;
  bool is_pixels = false;
};

class PyImageProcessor {
 public:
  PyImageProcessor(const std::string& model, std::optional<std::int64_t> min_pixels,
                   std::optional<std::int64_t> max_pixels, std::optional<int> patch_size, std::optional<int> merge_size,
                   std::optional<std::vector<float>> image_mean, std::optional<std::vector<float>> image_std, bool exif,
                   const std::string& alpha, const std::string& output, const std::string& kernel, int threads,
                   bool fast)
      : threads_(std::max(1, threads)) {
    vision::ProcessorConfig config;
    config.profile = unwrap(vision::model_profile(model));
    if (min_pixels) config.profile.min_pixels = *min_pixels;
    if (max_pixels) config.profile.max_pixels = *max_pixels;
    if (patch_size) config.profile.patch_size = *patch_size;
    if (merge_size) config.profile.merge_size = *merge_size;
    auto set3 = [](const std::optional<std::vector<float>>& v, std::array<float, 3>& out, const char* what) {
      if (!v) return;
      if (v->size() != 3) throw nb::value_error((std::string(what) + " needs 3 values").c_str());
      std::copy(v->begin(), v->end(), out.begin());
    };
    set3(image_mean, config.profile.mean, "image_mean");
    set3(image_std, config.profile.std, "image_std");
    config.decode.exif = exif ? vision::ExifPolicy::kApply : vision::ExifPolicy::kIgnore;
    config.decode.alpha = alpha_policy(alpha);
    if (output == "float32") {
      config.output = vision::OutputType::kFloat32;
    } else if (output == "bfloat16") {
      config.output = vision::OutputType::kBFloat16;
    } else if (output == "uint8") {
      config.output = vision::OutputType::kUInt8;
    } else {
      throw nb::value_error("output must be 'float32', 'bfloat16' or 'uint8'");
    }
    config.kernel = kernel_from(kernel);
    config.fast_jpeg = fast;
    proc_ = std::make_unique<vision::ImageProcessor>(std::move(config));
  }

  // Returns (rows, grids) for a list of bytes / uint8 arrays.
  // `alphas` (optional) gives each pixel array its own alpha policy: PIL images reach HF's
  // alpha compositing while arrays and files keep the processor's policy.
  nb::tuple process(nb::list items, std::optional<std::vector<std::string>> alphas) {
    std::vector<Input> inputs(nb::len(items));
    if (alphas && alphas->size() != inputs.size()) throw nb::value_error("alphas must match images");
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      nb::handle h = items[i];
      inputs[i].alpha = alphas ? alpha_policy((*alphas)[i]) : proc_->config().decode.alpha;
      if (nb::isinstance<nb::bytes>(h)) {
        nb::bytes b = nb::borrow<nb::bytes>(h);
        inputs[i].encoded.assign(b.c_str(), b.size());
      } else {
        inputs[i].pixels = nb::cast<nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu>>(h);
        const auto& a = inputs[i].pixels;
        if (!(a.ndim() == 2 || (a.ndim() == 3 && (a.shape(2) == 1 || a.shape(2) == 3 || a.shape(2) == 4)))) {
          throw nb::value_error("pixel arrays must be uint8 (height, width) or (height, width, 1|3|4)");
        }
        inputs[i].is_pixels = true;
      }
    }
    const std::size_t n = inputs.size();
    std::vector<vision::Grid> grids(n);
    std::vector<std::optional<Error>> errors(n);
    auto span_of = [&](std::size_t i) {
      return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(inputs[i].encoded.data()),
                                           inputs[i].encoded.size());
    };
    auto pixels_of = [&](std::size_t i) {
      const auto& a = inputs[i].pixels;
      const int channels = a.ndim() == 2 ? 1 : static_cast<int>(a.shape(2));
      return vision::rgb_from_pixels(a.data(), static_cast<int>(a.shape(1)), static_cast<int>(a.shape(0)), channels,
                                     inputs[i].alpha);
    };
    {
      nb::gil_scoped_release release;
      // Phase 1: every grid from headers (or array shapes), so one output array holds all rows.
      parallel(n, [&](std::size_t i) {
        Result<vision::Grid> g = Error(ErrorCode::kInternal, "unset");
        if (inputs[i].is_pixels) {
          g = proc_->plan(static_cast<int>(inputs[i].pixels.shape(0)), static_cast<int>(inputs[i].pixels.shape(1)));
        } else {
          auto info = vision::probe(span_of(i));
          g = info.ok() ? proc_->plan(*info) : Result<vision::Grid>(std::move(info).error());
        }
        if (g.ok()) {
          grids[i] = *g;
        } else {
          errors[i] = std::move(g).error().with_context("image " + std::to_string(i));
        }
      });
    }
    for (auto& e : errors) {
      if (e) raise(*e);
    }
    std::vector<std::int64_t> offsets(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + grids[i].rows();
    const std::size_t row_bytes = proc_->row_bytes();
    // Rows live in a pooled buffer: when numpy drops the array, the memory goes back to the
    // pool (already faulted in) for the next call instead of to the kernel.
    auto* buffer = new core::Buffer(pool_.acquire(offsets[n] * row_bytes));
    std::uint8_t* data = reinterpret_cast<std::uint8_t*>(buffer->data());
    nb::capsule owner(buffer, [](void* p) noexcept { delete static_cast<core::Buffer*>(p); });
    {
      nb::gil_scoped_release release;
      // Phase 2: decode, resize and patchify each image into its rows.
      parallel(n, [&](std::size_t i) {
        std::uint8_t* dest = data + offsets[i] * row_bytes;
        auto r = inputs[i].is_pixels ? proc_->process_rgb(pixels_of(i), dest, grids[i].rows())
                                     : proc_->process(span_of(i), dest, grids[i].rows());
        if (!r.ok()) {
          errors[i] = std::move(r).error().with_context("image " + std::to_string(i));
        } else if (r->rows() != grids[i].rows()) {
          errors[i] = Error(ErrorCode::kCorruptData, "decoded size differs from the header's")
                          .with_context("image " + std::to_string(i));
        }
      });
    }
    for (auto& e : errors) {
      if (e) raise(*e);
    }
    auto* grid_data = new std::int64_t[std::max<std::size_t>(1, n * 3)];
    for (std::size_t i = 0; i < n; ++i) {
      grid_data[i * 3] = grids[i].t;
      grid_data[i * 3 + 1] = grids[i].h;
      grid_data[i * 3 + 2] = grids[i].w;
    }
    nb::capsule grid_owner(grid_data, [](void* p) noexcept { delete[] static_cast<std::int64_t*>(p); });
    const std::size_t cols = static_cast<std::size_t>(proc_->row_elements());
    const std::size_t rows = static_cast<std::size_t>(offsets[n]);
    nb::object pixel_values;
    switch (proc_->config().output) {
      case vision::OutputType::kFloat32:
        pixel_values = nb::cast(nb::ndarray<nb::numpy, float>(data, {rows, cols}, owner));
        break;
      case vision::OutputType::kBFloat16:  // numpy has no bfloat16: the raw 16-bit words
        pixel_values = nb::cast(nb::ndarray<nb::numpy, std::uint16_t>(data, {rows, cols}, owner));
        break;
      case vision::OutputType::kUInt8:
        pixel_values = nb::cast(nb::ndarray<nb::numpy, std::uint8_t>(data, {rows, cols}, owner));
        break;
    }
    auto grid_array = nb::cast(nb::ndarray<nb::numpy, std::int64_t>(grid_data, {n, 3}, grid_owner));
    return nb::make_tuple(pixel_values, grid_array);
  }

  nb::tuple plan(int height, int width) {
    const vision::Grid g = unwrap(proc_->plan(height, width));
    return nb::make_tuple(g.t, g.h, g.w);
  }

 private:
  template <class F>
  void parallel(std::size_t n, F&& fn) {
    const std::size_t workers = std::min<std::size_t>(threads_, n);
    if (workers <= 1) {
      for (std::size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (std::size_t w = 0; w < workers; ++w) {
      pool.emplace_back([&] {
        for (std::size_t i = next++; i < n; i = next++) fn(i);
      });
    }
    for (auto& t : pool) t.join();
  }

  std::unique_ptr<vision::ImageProcessor> proc_;
  int threads_;
  core::BufferPool pool_{core::BufferPoolOptions{.alignment = 64, .max_cached_bytes = std::size_t{1} << 30}};
};

}  // namespace

void bind_vision(nb::module_& m) {
  nb::class_<PyImageProcessor>(m, "_ImageProcessor")
      .def(nb::init<const std::string&, std::optional<std::int64_t>, std::optional<std::int64_t>, std::optional<int>,
                    std::optional<int>, std::optional<std::vector<float>>, std::optional<std::vector<float>>, bool,
                    const std::string&, const std::string&, const std::string&, int, bool>(),
           nb::arg("model"), nb::arg("min_pixels").none(), nb::arg("max_pixels").none(), nb::arg("patch_size").none(),
           nb::arg("merge_size").none(), nb::arg("image_mean").none(), nb::arg("image_std").none(), nb::arg("exif"),
           nb::arg("alpha"), nb::arg("output"), nb::arg("kernel"), nb::arg("threads"), nb::arg("fast"))
      .def("process", &PyImageProcessor::process, nb::arg("images"), nb::arg("alphas").none() = nb::none())
      .def("plan", &PyImageProcessor::plan, nb::arg("height"), nb::arg("width"));
  m.def(
      "resize",
      [](nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu> image, int width, int height,
         const std::string& filter, const std::string& kernel) {
        if (image.ndim() != 3 || image.shape(2) < 1 || image.shape(2) > 4) {
          throw nb::value_error("resize takes a uint8 array (height, width, channels 1-4)");
        }
        if (width <= 0 || height <= 0) throw nb::value_error("width and height must be positive");
        vision::Filter f;
        if (filter == "bicubic")
          f = vision::Filter::kBicubic;
        else if (filter == "bicubic-torch")
          f = vision::Filter::kBicubicTorch;
        else if (filter == "bilinear")
          f = vision::Filter::kBilinear;
        else if (filter == "lanczos")
          f = vision::Filter::kLanczos;
        else if (filter == "box")
          f = vision::Filter::kBox;
        else if (filter == "hamming")
          f = vision::Filter::kHamming;
        else
          throw nb::value_error("filter must be bicubic, bicubic-torch, bilinear, lanczos, box or hamming");
        const vision::Kernel k = kernel_from(kernel);
        const int channels = static_cast<int>(image.shape(2));
        const std::size_t bytes = static_cast<std::size_t>(width) * height * channels;
        auto* out = new std::uint8_t[bytes];
        nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<std::uint8_t*>(p); });
        {
          nb::gil_scoped_release release;
          vision::resample_u8(image.data(), static_cast<int>(image.shape(1)), static_cast<int>(image.shape(0)),
                              channels, out, width, height, f, k);
        }
        return nb::ndarray<nb::numpy, std::uint8_t>(
            out,
            {static_cast<std::size_t>(height), static_cast<std::size_t>(width), static_cast<std::size_t>(channels)},
            owner);
      },
      nb::arg("image"), nb::arg("width"), nb::arg("height"), nb::arg("filter") = "bicubic", nb::arg("kernel") = "auto",
      "Pillow-exact resize of a uint8 (height, width, channels) array to (height, width, channels); "
      "'bicubic-torch' is torch's antialiased bicubic on uint8 (torchvision's resize), byte for byte.");
  m.def(
      "decode",
      [](nb::bytes data, bool exif, const std::string& alpha) {
        vision::DecodeOptions options;
        options.exif = exif ? vision::ExifPolicy::kApply : vision::ExifPolicy::kIgnore;
        options.alpha = alpha_policy(alpha);
        Result<vision::RgbImage> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = vision::decode_rgb({reinterpret_cast<const std::uint8_t*>(data.c_str()), data.size()}, options);
        }
        if (!r.ok()) raise(r.error());
        auto* img = new vision::RgbImage(std::move(r).value());
        nb::capsule owner(img, [](void* p) noexcept { delete static_cast<vision::RgbImage*>(p); });
        return nb::ndarray<nb::numpy, std::uint8_t>(
            img->pixels.data(), {static_cast<std::size_t>(img->height), static_cast<std::size_t>(img->width), 3},
            owner);
      },
      nb::arg("data"), nb::arg("exif") = true, nb::arg("alpha") = "drop",
      "Decodes JPEG/PNG/WebP bytes to a (height, width, 3) uint8 array exactly as Pillow's "
      "open + exif_transpose + convert('RGB') (alpha per policy).");
  m.def("video_libraries", &vision::video_libraries,
        "The FFmpeg libraries videos are decoded with, or why this build has none.");
  m.def(
      "probe_video",
      [](nb::bytes data) {
        Result<vision::VideoInfo> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = vision::probe_video({reinterpret_cast<const std::byte*>(data.c_str()), data.size()}, {});
        }
        if (!r.ok()) raise(r.error());
        nb::dict out;
        out["width"] = r->width;
        out["height"] = r->height;
        out["frames"] = r->frames;
        out["fps"] = r->fps;
        out["duration_s"] = r->duration_s;
        out["codec"] = r->codec;
        out["rotation"] = r->rotation;
        return out;
      },
      nb::arg("data"),
      "What a video file's best video stream holds: width, height, frames, fps, duration_s, codec, rotation.");
  m.def(
      "decode_video",
      [](nb::bytes data, std::vector<std::int64_t> indices) {
        Result<vision::VideoFrames> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = vision::decode_video_frames({reinterpret_cast<const std::byte*>(data.c_str()), data.size()}, indices, {});
        }
        if (!r.ok()) raise(r.error());
        auto* frames = new vision::VideoFrames(std::move(r).value());
        nb::capsule owner(frames, [](void* p) noexcept { delete static_cast<vision::VideoFrames*>(p); });
        return nb::ndarray<nb::numpy, std::uint8_t>(frames->rgb.data(),
                                                    {frames->indices.size(), static_cast<std::size_t>(frames->height),
                                                     static_cast<std::size_t>(frames->width), 3},
                                                    owner);
      },
      nb::arg("data"), nb::arg("indices"),
      "The frames at `indices` (presentation order, ascending) of a video file as a (n, height, width, 3) uint8 "
      "RGB array.");
  m.def(
      "plan_video_frames",
      [](std::int64_t total_frames, double video_fps, std::optional<double> nframes, std::optional<double> fps,
         std::optional<double> min_frames, std::optional<double> max_frames, std::optional<double> video_start,
         std::optional<double> video_end) {
        const vision::VideoSamplingRequest request{nframes, fps, min_frames, max_frames, video_start, video_end};
        auto plan = vision::plan_qwen2_video_frames(request, total_frames, video_fps);
        if (!plan.ok()) raise(plan.error());
        nb::dict out;
        out["first"] = plan->first;
        out["last"] = plan->last;
        out["indices"] = plan->indices;
        out["sample_fps"] = plan->sample_fps;
        return out;
      },
      nb::arg("total_frames"), nb::arg("video_fps"), nb::arg("nframes") = nb::none(), nb::arg("fps") = nb::none(),
      nb::arg("min_frames") = nb::none(), nb::arg("max_frames") = nb::none(), nb::arg("video_start") = nb::none(),
      nb::arg("video_end") = nb::none(),
      "The frames qwen-vl-utils keeps for Qwen2/2.5-VL (first, last, indices, sample_fps).");
  m.def(
      "process_video",
      [](nb::bytes data, const std::string& model, const std::string& output, std::optional<double> nframes,
         std::optional<double> fps, std::optional<double> min_frames, std::optional<double> max_frames,
         std::optional<double> video_start, std::optional<double> video_end, std::optional<double> min_pixels,
         std::optional<double> max_pixels, std::optional<double> total_pixels) {
        vision::OutputType type;
        if (output == "float32")
          type = vision::OutputType::kFloat32;
        else if (output == "bfloat16")
          type = vision::OutputType::kBFloat16;
        else if (output == "uint8")
          type = vision::OutputType::kUInt8;
        else
          throw nb::value_error("output must be 'float32', 'bfloat16' or 'uint8'");
        const vision::VideoProcessor proc(unwrap(vision::video_profile(model)), type);
        vision::VideoRequest request;
        request.sampling = {nframes, fps, min_frames, max_frames, video_start, video_end};
        request.min_pixels = min_pixels;
        request.max_pixels = max_pixels;
        request.total_pixels = total_pixels;
        const std::span<const std::byte> bytes{reinterpret_cast<const std::byte*>(data.c_str()), data.size()};
        Result<vision::VideoPlan> plan = Error(ErrorCode::kInternal, "unset");
        std::size_t total = 0;
        std::uint8_t* rows = nullptr;
        {
          nb::gil_scoped_release release;
          plan = proc.plan(bytes, request);
          if (plan.ok()) {
            total = static_cast<std::size_t>(plan->grid.rows()) * proc.row_bytes();
            rows = new std::uint8_t[std::max<std::size_t>(total, 1)];
            if (Status st = proc.process(bytes, *plan, rows); !st.ok()) {
              delete[] rows;
              plan = st.error();
            }
          }
        }
        if (!plan.ok()) raise(plan.error());
        nb::capsule owner(rows, [](void* p) noexcept { delete[] static_cast<std::uint8_t*>(p); });
        const std::size_t shape[2] = {static_cast<std::size_t>(plan->grid.rows()),
                                      static_cast<std::size_t>(proc.row_elements())};
        nb::dict out;
        if (type == vision::OutputType::kFloat32) {
          out["pixel_values_videos"] = nb::ndarray<nb::numpy, float>(rows, 2, shape, owner);
        } else if (type == vision::OutputType::kBFloat16) {
          out["pixel_values_videos"] = nb::ndarray<nb::numpy, std::uint16_t>(rows, 2, shape, owner);
        } else {
          out["pixel_values_videos"] = nb::ndarray<nb::numpy, std::uint8_t>(rows, 2, shape, owner);
        }
        out["video_grid_thw"] = std::vector<int>{plan->grid.t, plan->grid.h, plan->grid.w};
        out["indices"] = plan->indices;
        out["size"] = std::vector<int>{plan->size.height, plan->size.width};
        out["video_fps"] = plan->video_fps;
        out["sample_fps"] = plan->sample_fps;
        out["second_per_grid_t"] = vision::second_per_grid_t(proc.profile(), *plan);
        out["timestamps"] = plan->timestamps;
        return out;
      },
      nb::arg("data"), nb::arg("model") = "qwen2-vl", nb::arg("output") = "float32", nb::arg("nframes") = nb::none(),
      nb::arg("fps") = nb::none(), nb::arg("min_frames") = nb::none(), nb::arg("max_frames") = nb::none(),
      nb::arg("video_start") = nb::none(), nb::arg("video_end") = nb::none(), nb::arg("min_pixels") = nb::none(),
      nb::arg("max_pixels") = nb::none(), nb::arg("total_pixels") = nb::none(),
      "A video file's pixel_values_videos rows and video_grid_thw as the model's recipe makes them (Qwen2/2.5-VL: "
      "qwen-vl-utils' sampling and sizing, then the HF video processor; Qwen3-VL: its HF video processor), with "
      "the frames decoded (indices), their size, the file's and the sampled frame rate, Qwen2.5-VL's "
      "second_per_grid_t and Qwen3-VL's per-group timestamps. Keyword arguments are the content item's keys.");
  m.def(
      "normalize_table",
      [](const std::string& model, bool video) {
        const vision::ModelProfile profile = unwrap(vision::model_profile(model));
        const vision::NormalizeTable table(profile,
                                           video ? vision::Normalization::kVideo : vision::Normalization::kImage);
        auto* values = new float[3 * 256];
        auto* words = new std::uint16_t[3 * 256];
        for (std::size_t c = 0; c < 3; ++c) {
          for (std::size_t v = 0; v < 256; ++v) {
            values[c * 256 + v] = table.value[c][v];
            words[c * 256 + v] = vision::to_bfloat16(table.value[c][v]);
          }
        }
        nb::capsule value_owner(values, [](void* p) noexcept { delete[] static_cast<float*>(p); });
        nb::capsule word_owner(words, [](void* p) noexcept { delete[] static_cast<std::uint16_t*>(p); });
        return nb::make_tuple(nb::ndarray<nb::numpy, float>(values, {3, 256}, value_owner),
                              nb::ndarray<nb::numpy, std::uint16_t>(words, {3, 256}, word_owner),
                              profile.temporal_patch_size, profile.patch_size);
      },
      nb::arg("model"), nb::arg("video") = false,
      "(float32 table, bfloat16 table as uint16 words, temporal_patch_size, patch_size): the value of each byte "
      "of each channel as the model's image (or, video=True, video) processor normalizes it, exactly the engine's.");
  m.def(
      "simd_target", [] { return std::string(vision::simd_target()); },
      "The SIMD instruction set the resampling kernels dispatched to on this CPU.");
}
