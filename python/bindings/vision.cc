// Binding of the vision API (mmfeed/vision.h): numpy in, numpy out (pixel rows owned by a
// capsule, no copy). Work runs with the GIL released.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "mmfeed/vision.h"
#include "python/bindings/errors.h"

namespace nb = nanobind;
using namespace mmfeed;
using python::value_or_raise;

namespace {

using U8Array = nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu>;

template <class E>
E choice_of(const std::string& name, const char* what) {
  const std::optional<E> v = parse_choice<E>(name);
  if (!v) throw nb::value_error((std::string(what) + " must be " + choice_list<E>() + ", not '" + name + "'").c_str());
  return *v;
}

std::span<const std::byte> bytes_of(const nb::bytes& b) {
  return {reinterpret_cast<const std::byte*>(b.c_str()), b.size()};
}

// `rows` as a numpy array (rows, row_elements) sharing their buffer; numpy has no bfloat16: its
// 16-bit words.
nb::object rows_array(PixelRows rows) {
  auto* owner = new std::shared_ptr<void>(std::move(rows.owner));
  nb::capsule capsule(owner, [](void* p) noexcept { delete static_cast<std::shared_ptr<void>*>(p); });
  const std::size_t shape[2] = {rows.rows, rows.row_elements};
  switch (rows.type) {
    case Pixels::kFloat32: return nb::cast(nb::ndarray<nb::numpy, float>(rows.data, 2, shape, capsule));
    case Pixels::kBFloat16: return nb::cast(nb::ndarray<nb::numpy, std::uint16_t>(rows.data, 2, shape, capsule));
    case Pixels::kUInt8: break;
  }
  return nb::cast(nb::ndarray<nb::numpy, std::uint8_t>(rows.data, 2, shape, capsule));
}

// A (n, 3) int64 array of grids.
nb::object grids_array(const std::vector<GridThw>& grids) {
  auto* data = new std::int64_t[std::max<std::size_t>(1, grids.size() * 3)];
  for (std::size_t i = 0; i < grids.size(); ++i) std::copy(grids[i].begin(), grids[i].end(), data + i * 3);
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<std::int64_t*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, std::int64_t>(data, {grids.size(), 3}, owner));
}

std::optional<std::array<float, 3>> three(const std::optional<std::vector<float>>& v, const char* what) {
  if (!v) return std::nullopt;
  if (v->size() != 3) throw nb::value_error((std::string(what) + " needs 3 values").c_str());
  return std::array<float, 3>{(*v)[0], (*v)[1], (*v)[2]};
}

class PyImageProcessor {
 public:
  PyImageProcessor(const std::string& model, const std::string& backend, std::optional<std::int64_t> min_pixels,
                   std::optional<std::int64_t> max_pixels, std::optional<int> patch_size, std::optional<int> merge_size,
                   std::optional<std::vector<float>> image_mean, std::optional<std::vector<float>> image_std, bool exif,
                   const std::string& alpha, const std::string& output, const std::string& kernel, int threads,
                   bool fast)
      : proc_(value_or_raise(ImageProcessor::create({.model = model,
                                                     .backend = choice_of<ImageBackend>(backend, "backend"),
                                                     .min_pixels = min_pixels.value_or(0),
                                                     .max_pixels = max_pixels.value_or(0),
                                                     .patch_size = patch_size.value_or(0),
                                                     .merge_size = merge_size.value_or(0),
                                                     .image_mean = three(image_mean, "image_mean"),
                                                     .image_std = three(image_std, "image_std"),
                                                     .exif = exif,
                                                     .alpha = choice_of<AlphaPolicy>(alpha, "alpha"),
                                                     .output = choice_of<Pixels>(output, "output"),
                                                     .kernel = choice_of<ImageKernel>(kernel, "kernel"),
                                                     .threads = threads,
                                                     .fast_jpeg = fast}))) {}

  // (rows, grids) for a list of bytes / uint8 arrays. `alphas` (optional) gives each pixel array
  // its own alpha policy: PIL images reach HF's alpha compositing while arrays and files keep
  // the processor's policy.
  nb::tuple process(nb::list items, std::optional<std::vector<std::string>> alphas) {
    const std::size_t n = nb::len(items);
    if (alphas && alphas->size() != n) throw nb::value_error("alphas must match images");
    std::vector<ImageInput> inputs(n);
    std::vector<nb::object> keep(n);  // the bytes and arrays the inputs point into
    for (std::size_t i = 0; i < n; ++i) {
      nb::handle h = items[i];
      keep[i] = nb::borrow(h);
      if (alphas) inputs[i].alpha = choice_of<AlphaPolicy>((*alphas)[i], "alpha");
      if (nb::isinstance<nb::bytes>(h)) {
        nb::bytes b = nb::borrow<nb::bytes>(h);
        inputs[i].encoded = {reinterpret_cast<const std::uint8_t*>(b.c_str()), b.size()};
        continue;
      }
      const U8Array a = nb::cast<U8Array>(h);
      if (!(a.ndim() == 2 || (a.ndim() == 3 && (a.shape(2) == 1 || a.shape(2) == 3 || a.shape(2) == 4)))) {
        throw nb::value_error("pixel arrays must be uint8 (height, width) or (height, width, 1|3|4)");
      }
      inputs[i].pixels = a.data();
      inputs[i].height = static_cast<int>(a.shape(0));
      inputs[i].width = static_cast<int>(a.shape(1));
      inputs[i].channels = a.ndim() == 2 ? 1 : static_cast<int>(a.shape(2));
    }
    Result<PixelRows> r = Error(ErrorCode::kInternal, "unset");
    {
      nb::gil_scoped_release release;
      r = proc_.process(inputs);
    }
    PixelRows rows = value_or_raise(std::move(r));
    nb::object grids = grids_array(rows.grids);
    return nb::make_tuple(rows_array(std::move(rows)), grids);
  }

  nb::tuple plan(int height, int width) {
    const GridThw g = value_or_raise(proc_.plan(height, width));
    return nb::make_tuple(g[0], g[1], g[2]);
  }

 private:
  ImageProcessor proc_;
};

// Videos: probing, decoding, frame plans and the models' video recipes.
void bind_videos(nb::module_& m) {
  m.def("video_libraries", &video_libraries,
        "The FFmpeg libraries videos are decoded with, or why this build has none.");
  m.def(
      "probe_video",
      [](nb::bytes data) {
        Result<VideoInfo> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = probe_video(bytes_of(data));
        }
        const VideoInfo info = value_or_raise(std::move(r));
        nb::dict out;
        out["width"] = info.width;
        out["height"] = info.height;
        out["frames"] = info.frames;
        out["fps"] = info.fps;
        out["duration_s"] = info.duration_s;
        out["codec"] = info.codec;
        out["rotation"] = info.rotation;
        return out;
      },
      nb::arg("data"),
      "What a video file's best video stream holds: width, height, frames, fps, duration_s, codec, rotation.");
  m.def(
      "decode_video",
      [](nb::bytes data, std::vector<std::int64_t> indices) {
        Result<VideoFrames> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = decode_video(bytes_of(data), indices);
        }
        auto* frames = new VideoFrames(value_or_raise(std::move(r)));
        nb::capsule owner(frames, [](void* p) noexcept { delete static_cast<VideoFrames*>(p); });
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
        const VideoFramePlan plan = value_or_raise(
            plan_video_frames({nframes, fps, min_frames, max_frames, video_start, video_end}, total_frames, video_fps));
        nb::dict out;
        out["first"] = plan.first;
        out["last"] = plan.last;
        out["indices"] = plan.indices;
        out["sample_fps"] = plan.sample_fps;
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
        VideoOptions options;
        options.model = model;
        options.output = choice_of<Pixels>(output, "output");
        options.sampling = {nframes, fps, min_frames, max_frames, video_start, video_end};
        options.min_pixels = min_pixels;
        options.max_pixels = max_pixels;
        options.total_pixels = total_pixels;
        Result<ProcessedVideo> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = process_video(bytes_of(data), options);
        }
        ProcessedVideo video = value_or_raise(std::move(r));
        nb::dict out;
        const GridThw grid = video.rows.grids.at(0);
        out["pixel_values_videos"] = rows_array(std::move(video.rows));
        out["video_grid_thw"] = std::vector<std::int64_t>(grid.begin(), grid.end());
        out["indices"] = video.indices;
        out["size"] = std::vector<int>{video.height, video.width};
        out["video_fps"] = video.video_fps;
        out["sample_fps"] = video.sample_fps;
        out["second_per_grid_t"] = video.second_per_grid_t;
        out["timestamps"] = video.timestamps;
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
}

}  // namespace

void bind_vision(nb::module_& m) {
  bind_videos(m);
  nb::class_<PyImageProcessor>(m, "_ImageProcessor")
      .def(nb::init<const std::string&, const std::string&, std::optional<std::int64_t>, std::optional<std::int64_t>,
                    std::optional<int>, std::optional<int>, std::optional<std::vector<float>>,
                    std::optional<std::vector<float>>, bool, const std::string&, const std::string&, const std::string&,
                    int, bool>(),
           nb::arg("model"), nb::arg("backend"), nb::arg("min_pixels").none(), nb::arg("max_pixels").none(),
           nb::arg("patch_size").none(), nb::arg("merge_size").none(), nb::arg("image_mean").none(),
           nb::arg("image_std").none(), nb::arg("exif"), nb::arg("alpha"), nb::arg("output"), nb::arg("kernel"),
           nb::arg("threads"), nb::arg("fast"))
      .def("process", &PyImageProcessor::process, nb::arg("images"), nb::arg("alphas").none() = nb::none())
      .def("plan", &PyImageProcessor::plan, nb::arg("height"), nb::arg("width"));
  m.def(
      "resize",
      [](U8Array image, int width, int height, const std::string& filter, const std::string& kernel) {
        if (image.ndim() != 3 || image.shape(2) < 1 || image.shape(2) > 4) {
          throw nb::value_error("resize takes a uint8 array (height, width, channels 1-4)");
        }
        if (width <= 0 || height <= 0) throw nb::value_error("width and height must be positive");
        const ResizeFilter f = choice_of<ResizeFilter>(filter, "filter");
        const ImageKernel k = choice_of<ImageKernel>(kernel, "kernel");
        const int channels = static_cast<int>(image.shape(2));
        const std::size_t bytes = static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * channels;
        auto* out = new std::uint8_t[bytes];
        nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<std::uint8_t*>(p); });
        Status st;
        {
          nb::gil_scoped_release release;
          st = resize_image(image.data(), static_cast<int>(image.shape(1)), static_cast<int>(image.shape(0)), channels,
                            out, width, height, f, k);
        }
        python::raise_if_error(st);
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
        const AlphaPolicy a = choice_of<AlphaPolicy>(alpha, "alpha");
        Result<RgbPixels> r = Error(ErrorCode::kInternal, "unset");
        {
          nb::gil_scoped_release release;
          r = decode_image({reinterpret_cast<const std::uint8_t*>(data.c_str()), data.size()}, exif, a);
        }
        auto* img = new RgbPixels(value_or_raise(std::move(r)));
        nb::capsule owner(img, [](void* p) noexcept { delete static_cast<RgbPixels*>(p); });
        return nb::ndarray<nb::numpy, std::uint8_t>(
            img->pixels.data(), {static_cast<std::size_t>(img->height), static_cast<std::size_t>(img->width), 3},
            owner);
      },
      nb::arg("data"), nb::arg("exif") = true, nb::arg("alpha") = "drop",
      "Decodes JPEG/PNG/WebP bytes to a (height, width, 3) uint8 array exactly as Pillow's "
      "open + exif_transpose + convert('RGB') (alpha per policy).");
  m.def(
      "normalize_table",
      [](const std::string& model, bool video, const std::string& backend) {
        auto* tables = new NormalizeTables(
            value_or_raise(normalize_tables(model, video, choice_of<ImageBackend>(backend, "image_backend"))));
        nb::capsule owner(tables, [](void* p) noexcept { delete static_cast<NormalizeTables*>(p); });
        return nb::make_tuple(nb::ndarray<nb::numpy, float>(tables->values[0].data(), {3, 256}, owner),
                              nb::ndarray<nb::numpy, std::uint16_t>(tables->bfloat16[0].data(), {3, 256}, owner),
                              tables->temporal_patch_size, tables->patch_size);
      },
      nb::arg("model"), nb::arg("video") = false, nb::arg("backend") = "pil",
      "(float32 table, bfloat16 table as uint16 words, temporal_patch_size, patch_size): the value of each byte "
      "of each channel as the model's image processor of that backend (or, video=True, its video processor) "
      "normalizes it, exactly the engine's.");
  m.def(
      "simd_target", [] { return std::string(simd_target()); },
      "The SIMD instruction set the resampling kernels dispatched to on this CPU.");
}
