// Images and videos as the Loader prepares them, one call at a time: the Hugging Face Qwen-VL
// image processor reproduced bit for bit — decode as Pillow, resize (Pillow's bicubic for its PIL
// backend, torch's for its torchvision backend), normalize, cut into patches — and the models' video recipes
// (qwen-vl-utils' sampling and sizing for Qwen2/2.5-VL, transformers' Qwen3-VL video processor), with the pieces they
// are made of (decode, resize, frame plans, normalization tables).
//
// Example:
//   ImageProcessorOptions o;
//   o.model = "qwen2.5-vl";
//   MMFEED_ASSIGN_OR_RETURN(ImageProcessor proc, ImageProcessor::create(o));
//   ImageInput in;
//   in.encoded = jpeg_bytes;                       // a std::span<const std::uint8_t>
//   MMFEED_ASSIGN_OR_RETURN(PixelRows rows, proc.process({&in, 1}));
//   // rows.data: rows.rows x rows.row_elements float32 (pixel_values), rows.grids[0]: image_grid_thw
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/choices.h"
#include "mmfeed/error.h"

namespace mmfeed {

struct ImageProcessorOptions {
  std::string model = "qwen2-vl";             // qwen2-vl, qwen2.5-vl, qwen3-vl: the processor's settings
  ImageBackend backend = ImageBackend::kPil;  // which of transformers' processors to match
  std::int64_t min_pixels = 0;                // 0: the model's
  std::int64_t max_pixels = 0;
  int patch_size = 0;  // 0: the model's
  int merge_size = 0;
  std::optional<std::array<float, 3>> image_mean{};  // nullopt: the model's
  std::optional<std::array<float, 3>> image_std{};
  bool exif = true;  // apply the EXIF orientation, as transformers' load_image does
  AlphaPolicy alpha = AlphaPolicy::kDrop;
  Pixels output = Pixels::kFloat32;
  ImageKernel kernel = ImageKernel::kAuto;
  int threads = 1;  // images of one process() call decoded at once
  // Approximate, opt-in: JPEGs decoded at 1/2, 1/4 or 1/8 size (the largest reduction the resize
  // still shrinks 1.5x), as Pillow's draft(); the grid is unchanged, pixel values are not exact.
  bool fast_jpeg = false;
};

// One image: its encoded bytes (JPEG, PNG, WebP), or decoded 8-bit pixels.
struct ImageInput {
  std::span<const std::uint8_t> encoded{};
  const std::uint8_t* pixels = nullptr;  // height x width x channels, rows packed
  int width = 0;
  int height = 0;
  int channels = 0;                    // 1, 3 or 4
  std::optional<AlphaPolicy> alpha{};  // nullopt: the processor's
};

// Pixel rows (pixel_values or pixel_values_videos) in one buffer, shared by whoever holds `owner`.
struct PixelRows {
  std::shared_ptr<void> owner;
  void* data = nullptr;
  std::size_t rows = 0;
  std::size_t row_elements = 0;  // C x T x P x P
  Pixels type = Pixels::kFloat32;
  std::vector<GridThw> grids;  // per image or video, in order
};

class ImageProcessor {
 public:
  // kInvalidArgument for an unknown model or a value out of range.
  static Result<ImageProcessor> create(const ImageProcessorOptions& options);
  ImageProcessor(ImageProcessor&&) noexcept;
  ImageProcessor& operator=(ImageProcessor&&) noexcept;
  ~ImageProcessor();

  // Every image's rows, planned from its header first so that one buffer holds them all; an
  // error names the image by index. Thread-safe.
  Result<PixelRows> process(std::span<const ImageInput> images) const;
  // The grid an image of this size gets.
  Result<GridThw> plan(int height, int width) const;

 private:
  struct Impl;
  explicit ImageProcessor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `pixels` (height x width x channels 1-4) resized into `out` (out_height x out_width x channels),
// exactly as Pillow's Image.resize (or torch's, for kBicubicTorch).
Status resize_image(const std::uint8_t* pixels, int width, int height, int channels, std::uint8_t* out, int out_width,
                    int out_height, ResizeFilter filter, ImageKernel kernel = ImageKernel::kAuto);

struct RgbPixels {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> pixels;  // height x width x 3
};

// JPEG / PNG / WebP bytes as Pillow's open + exif_transpose (with `exif`) + convert("RGB").
Result<RgbPixels> decode_image(std::span<const std::uint8_t> bytes, bool exif = true,
                               AlphaPolicy alpha = AlphaPolicy::kDrop);

// Per model, the value each byte of each channel normalizes to (the image processor's of
// `backend`, or the video processor's: mean, std and the order of the arithmetic): what the engine
// writes, for a trainer that normalizes uint8 rows.
struct NormalizeTables {
  std::array<std::array<float, 256>, 3> values;
  std::array<std::array<std::uint16_t, 256>, 3> bfloat16;  // the values rounded to bfloat16's words
  int temporal_patch_size = 2;
  int patch_size = 14;
};
Result<NormalizeTables> normalize_tables(std::string_view model, bool video = false,
                                         ImageBackend backend = ImageBackend::kPil);

// The instruction set the resampling kernels dispatched to on this CPU ("AVX2", ...).
std::string_view simd_target();

// Videos (decoded with FFmpeg's libraries when the build has them).

// The FFmpeg libraries videos are decoded with, or why this build has none.
std::string video_libraries();

struct VideoInfo {  // a container's best video stream
  int width = 0;
  int height = 0;
  std::int64_t frames = 0;  // video packets in the stream that decode to a frame (edit lists' discarded ones not)
  double fps = 0;           // the stream's average frame rate
  double duration_s = 0;    // frames / fps
  std::string codec;        // "h264", "vp9", ...
  int rotation = 0;         // degrees, from the display matrix, as PyAV's VideoFrame.rotation; not applied
};
Result<VideoInfo> probe_video(std::span<const std::byte> bytes);

struct VideoFrames {
  int width = 0;
  int height = 0;
  std::vector<std::int64_t> indices;  // the frames decoded, as asked
  std::vector<std::uint8_t> rgb;      // indices.size() x height x width x 3

  const std::uint8_t* frame(std::size_t i) const {
    return rgb.data() + i * static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3;
  }
};
// The frames at `indices` (presentation order, ascending), as RGB.
Result<VideoFrames> decode_video(std::span<const std::byte> bytes, std::span<const std::int64_t> indices);

// A content item's sampling keys, as qwen-vl-utils reads them; unset keys take its defaults.
struct VideoSamplingRequest {
  std::optional<double> nframes;      // exclusive with fps
  std::optional<double> fps;          // default 2.0
  std::optional<double> min_frames;   // with fps; default 4
  std::optional<double> max_frames;   // with fps; default min(768, frames in range)
  std::optional<double> video_start;  // seconds
  std::optional<double> video_end;    // seconds
};

struct VideoFramePlan {
  std::int64_t first = 0;             // the range's first frame
  std::int64_t last = 0;              // and last
  std::vector<std::int64_t> indices;  // the frames kept, ascending (repeats possible, as upstream)
  double sample_fps = 0;              // indices.size() / frames in range * video_fps
};
// The frames qwen-vl-utils keeps for Qwen2/2.5-VL of a video of `total_frames` at `video_fps`.
Result<VideoFramePlan> plan_video_frames(const VideoSamplingRequest& request, std::int64_t total_frames,
                                         double video_fps);

struct VideoOptions {
  std::string model = "qwen2-vl";
  Pixels output = Pixels::kFloat32;
  VideoSamplingRequest sampling;  // the content item's keys
  std::optional<double> min_pixels;
  std::optional<double> max_pixels;
  std::optional<double> total_pixels;
};

struct ProcessedVideo {
  PixelRows rows;                     // pixel_values_videos; rows.grids[0] is video_grid_thw
  std::vector<std::int64_t> indices;  // the frames decoded
  int height = 0;                     // each frame resized to
  int width = 0;
  double video_fps = 0;            // the file's
  double sample_fps = 0;           // the rate the kept frames stand for (Qwen2/2.5-VL)
  double second_per_grid_t = 0;    // Qwen2.5-VL's second_per_grid_ts
  std::vector<double> timestamps;  // Qwen3-VL: seconds of each temporal group
};
// A video file's rows as the model's recipe makes them.
Result<ProcessedVideo> process_video(std::span<const std::byte> bytes, const VideoOptions& options);

}  // namespace mmfeed
