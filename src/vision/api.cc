// The public vision API (include/mmfeed/vision.h) over the engine's image and video processors.
#include "mmfeed/vision.h"

#include <algorithm>
#include <new>

#include "core/buffer_pool.h"
#include "core/parallel.h"
#include "vision/decode.h"
#include "vision/image_transform.h"
#include "vision/patchify.h"
#include "vision/resample.h"
#include "vision/video.h"
#include "vision/video_processor.h"
#include "vision/video_sampling.h"

namespace mmfeed {

namespace {

GridThw grid_thw(const vision::Grid& g) { return {g.t, g.h, g.w}; }

}  // namespace

struct ImageProcessor::Impl {
  Impl(vision::ProcessorConfig config, int thread_count) : proc(std::move(config)), threads(thread_count) {}
  vision::ImageTransform proc;
  int threads;
  Pixels output = Pixels::kFloat32;
  // Rows live in pooled buffers: memory a caller lets go of is reused (already faulted in) by a
  // later call instead of going back to the system.
  core::BufferPool pool{core::BufferPoolOptions{.alignment = 64, .max_cached_bytes = std::size_t{1} << 30}};
};

ImageProcessor::ImageProcessor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ImageProcessor::ImageProcessor(ImageProcessor&&) noexcept = default;
ImageProcessor& ImageProcessor::operator=(ImageProcessor&&) noexcept = default;
ImageProcessor::~ImageProcessor() = default;

Result<ImageProcessor> ImageProcessor::create(const ImageProcessorOptions& options) {
  vision::ProcessorConfig config;
  MMFEED_ASSIGN_OR_RETURN(config.profile, vision::model_profile(options.model));
  if (options.min_pixels < 0 || options.max_pixels < 0 || options.patch_size < 0 || options.merge_size < 0) {
    return Error(ErrorCode::kInvalidArgument, "min_pixels, max_pixels, patch_size and merge_size must be positive");
  }
  if (options.min_pixels > 0) config.profile.min_pixels = options.min_pixels;
  if (options.max_pixels > 0) config.profile.max_pixels = options.max_pixels;
  if (options.patch_size > 0) config.profile.patch_size = options.patch_size;
  if (options.merge_size > 0) config.profile.merge_size = options.merge_size;
  if (options.image_mean) config.profile.mean = *options.image_mean;
  if (options.image_std) config.profile.std = *options.image_std;
  config.backend = options.backend;
  config.decode.exif = options.exif ? vision::ExifPolicy::kApply : vision::ExifPolicy::kIgnore;
  config.decode.alpha = options.alpha;
  config.output = options.output;
  config.kernel = options.kernel;
  config.fast_jpeg = options.fast_jpeg;
  auto impl = std::make_unique<Impl>(std::move(config), options.threads);
  impl->output = options.output;
  return ImageProcessor(std::move(impl));
}

Result<GridThw> ImageProcessor::plan(int height, int width) const {
  MMFEED_ASSIGN_OR_RETURN(vision::Grid g, impl_->proc.plan(height, width));
  return grid_thw(g);
}

Result<PixelRows> ImageProcessor::process(std::span<const ImageInput> images) const {
  const vision::ImageTransform& proc = impl_->proc;
  const std::size_t n = images.size();
  for (std::size_t i = 0; i < n; ++i) {
    const ImageInput& in = images[i];
    if (in.pixels != nullptr &&
        (in.width <= 0 || in.height <= 0 || in.channels < 1 || in.channels > 4 || in.channels == 2)) {
      return Error(ErrorCode::kInvalidArgument, "pixels must be (height, width) or (height, width, 1|3|4)",
                   "image " + std::to_string(i));
    }
  }
  std::vector<vision::Grid> grids(n);
  std::vector<std::optional<Error>> errors(n);
  auto first_error = [&]() -> std::optional<Error> {
    for (std::size_t i = 0; i < n; ++i) {
      if (errors[i]) return std::move(*errors[i]).with_context("image " + std::to_string(i));
    }
    return std::nullopt;
  };
  // Every grid from headers (or pixel shapes) first, so that one buffer holds all rows.
  core::parallel(n, impl_->threads, [&](std::size_t i) {
    Result<vision::Grid> g = Error(ErrorCode::kInternal, "unset");
    if (images[i].pixels != nullptr) {
      g = proc.plan(images[i].height, images[i].width);
    } else {
      auto info = vision::probe(images[i].encoded);
      g = info.ok() ? proc.plan(*info) : Result<vision::Grid>(std::move(info).error());
    }
    if (g.ok()) {
      grids[i] = *g;
    } else {
      errors[i] = std::move(g).error();
    }
  });
  if (auto e = first_error()) return *e;
  std::vector<std::int64_t> offsets(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + grids[i].rows();
  const std::size_t row_bytes = proc.row_bytes();
  auto buffer = std::make_shared<core::Buffer>(impl_->pool.acquire(static_cast<std::size_t>(offsets[n]) * row_bytes));
  auto* data = reinterpret_cast<std::uint8_t*>(buffer->data());
  // Decode, resize and patchify each image into its rows.
  core::parallel(n, impl_->threads, [&](std::size_t i) {
    const ImageInput& in = images[i];
    std::uint8_t* dest = data + static_cast<std::size_t>(offsets[i]) * row_bytes;
    Result<vision::Grid> r = Error(ErrorCode::kInternal, "unset");
    if (in.pixels != nullptr) {
      const vision::AlphaPolicy alpha = in.alpha ? *in.alpha : proc.config().decode.alpha;
      r = proc.process_rgb(vision::rgb_from_pixels(in.pixels, in.width, in.height, in.channels, alpha), dest,
                           grids[i].rows());
    } else {
      r = proc.process(in.encoded, dest, grids[i].rows());
    }
    if (!r.ok()) {
      errors[i] = std::move(r).error();
    } else if (r->rows() != grids[i].rows()) {
      errors[i] = Error(ErrorCode::kCorruptData, "decoded size differs from the header's");
    }
  });
  if (auto e = first_error()) return *e;
  PixelRows out;
  out.data = data;
  out.owner = std::move(buffer);
  out.rows = static_cast<std::size_t>(offsets[n]);
  out.row_elements = static_cast<std::size_t>(proc.row_elements());
  out.type = impl_->output;
  for (const vision::Grid& g : grids) out.grids.push_back(grid_thw(g));
  return out;
}

Status resize_image(const std::uint8_t* pixels, int width, int height, int channels, std::uint8_t* out, int out_width,
                    int out_height, ResizeFilter filter, ImageKernel kernel) {
  if (channels < 1 || channels > 4) return Error(ErrorCode::kInvalidArgument, "resize takes 1 to 4 channels");
  if (width <= 0 || height <= 0 || out_width <= 0 || out_height <= 0) {
    return Error(ErrorCode::kInvalidArgument, "width and height must be positive");
  }
  vision::resample_u8(pixels, width, height, channels, out, out_width, out_height, filter, kernel);
  return ok_status();
}

Result<RgbPixels> decode_image(std::span<const std::uint8_t> bytes, bool exif, AlphaPolicy alpha) {
  vision::DecodeOptions options;
  options.exif = exif ? vision::ExifPolicy::kApply : vision::ExifPolicy::kIgnore;
  options.alpha = alpha;
  MMFEED_ASSIGN_OR_RETURN(vision::RgbImage img, vision::decode_rgb(bytes, options));
  RgbPixels out;
  out.width = img.width;
  out.height = img.height;
  out.pixels.assign(img.pixels.begin(), img.pixels.end());
  return out;
}

Result<NormalizeTables> normalize_tables(std::string_view model, bool video, ImageBackend backend) {
  MMFEED_ASSIGN_OR_RETURN(vision::ModelProfile profile, vision::model_profile(model));
  const vision::NormalizeTable table(profile, video ? ImageBackend::kTorchvision : backend);
  NormalizeTables out;
  for (std::size_t c = 0; c < 3; ++c) {
    for (std::size_t v = 0; v < 256; ++v) {
      out.values[c][v] = table.value[c][v];
      out.bfloat16[c][v] = vision::to_bfloat16(table.value[c][v]);
    }
  }
  out.temporal_patch_size = profile.temporal_patch_size;
  out.patch_size = profile.patch_size;
  return out;
}

std::string_view simd_target() { return vision::simd_target(); }

std::string video_libraries() { return vision::video_libraries(); }

Result<VideoInfo> probe_video(std::span<const std::byte> bytes) { return vision::probe_video(bytes, {}); }

Result<VideoFrames> decode_video(std::span<const std::byte> bytes, std::span<const std::int64_t> indices) {
  return vision::decode_video_frames(bytes, indices, {});
}

Result<VideoFramePlan> plan_video_frames(const VideoSamplingRequest& request, std::int64_t total_frames,
                                         double video_fps) {
  return vision::plan_qwen2_video_frames(request, total_frames, video_fps);
}

Result<ProcessedVideo> process_video(std::span<const std::byte> bytes, const VideoOptions& options) {
  MMFEED_ASSIGN_OR_RETURN(vision::VideoProfile profile, vision::video_profile(options.model));
  const vision::VideoProcessor proc(std::move(profile), options.output);
  vision::VideoRequest request;
  request.sampling = options.sampling;
  request.min_pixels = options.min_pixels;
  request.max_pixels = options.max_pixels;
  request.total_pixels = options.total_pixels;
  MMFEED_ASSIGN_OR_RETURN(vision::VideoPlan plan, proc.plan(bytes, request));
  const std::size_t bytes_needed = static_cast<std::size_t>(plan.grid.rows()) * proc.row_bytes();
  std::shared_ptr<std::uint8_t[]> rows(new (std::nothrow) std::uint8_t[std::max<std::size_t>(bytes_needed, 1)]);
  if (rows == nullptr) {
    return Error(ErrorCode::kResourceExhausted, "cannot allocate " + std::to_string(bytes_needed) + " bytes of rows");
  }
  MMFEED_RETURN_IF_ERROR(proc.process(bytes, plan, rows.get()));
  ProcessedVideo out;
  out.rows.data = rows.get();
  out.rows.owner = std::move(rows);
  out.rows.rows = static_cast<std::size_t>(plan.grid.rows());
  out.rows.row_elements = static_cast<std::size_t>(proc.row_elements());
  out.rows.type = options.output;
  out.rows.grids = {grid_thw(plan.grid)};
  out.indices = plan.indices;
  out.height = plan.size.height;
  out.width = plan.size.width;
  out.video_fps = plan.video_fps;
  out.sample_fps = plan.sample_fps;
  out.second_per_grid_t = vision::second_per_grid_t(proc.profile(), plan);
  out.timestamps = plan.timestamps;
  return out;
}

}  // namespace mmfeed
