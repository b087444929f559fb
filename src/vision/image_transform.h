// One image through the Qwen-VL image processor (the engine's side of mmfeed::ImageProcessor and
// of the Loader): encoded bytes (or RGB pixels) in, pixel_values rows and the
// image's grid out, bit-exact with Hugging Face's Qwen2VLImageProcessorPil - decode as Pillow,
// smart_resize, Pillow-exact bicubic, rescale + normalize + patchify fused into the caller's
// buffer - or (ProcessorConfig::backend) with its torchvision Qwen2VLImageProcessor: torch's
// bicubic and fused normalization instead.
//
// Planning is separate from processing so a batcher can size its buffer from headers alone:
// plan() needs only probe()'s ImageInfo.
//
// Example:
//   ImageTransform proc(ProcessorConfig{.profile = model_profile("qwen2-vl").value()});
//   MMFEED_ASSIGN_OR_RETURN(ImageInfo info, probe(bytes));
//   MMFEED_ASSIGN_OR_RETURN(Grid grid, proc.plan(info));
//   std::vector<float> rows(grid.rows() * proc.row_elements());
//   MMFEED_ASSIGN_OR_RETURN(Grid done, proc.process(bytes, rows.data(), grid.rows()));
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "mmfeed/choices.h"
#include "mmfeed/error.h"
#include "vision/decode.h"
#include "vision/patchify.h"
#include "vision/profile.h"
#include "vision/resample.h"

namespace mmfeed::vision {

struct ProcessorConfig {
  ModelProfile profile;
  DecodeOptions decode;
  // Which of transformers' Qwen-VL image processors to reproduce: kPil, Qwen2VLImageProcessorPil
  // (Pillow's bicubic; rescale, then normalize); kTorchvision, Qwen2VLImageProcessor, the default
  // of transformers 5 wherever torchvision is installed (torch's antialiased bicubic on uint8,
  // rescale fused into normalize). Both decode as Pillow (transformers' load_image).
  ImageBackend backend = ImageBackend::kPil;
  Pixels output = Pixels::kFloat32;
  ImageKernel kernel = ImageKernel::kAuto;
  // Approximate, opt-in: a JPEG is decoded at 1/2, 1/4 or 1/8 size in the DCT domain (the
  // largest reduction after which the bicubic resize still shrinks it at least
  // `fast_min_remaining` times on both axes), as Pillow's draft() does for thumbnails. The grid
  // is unchanged; pixel values differ from the exact mode (bench/vision.py reports by how much).
  bool fast_jpeg = false;
  double fast_min_remaining = 1.5;
};

// An image decoded and resized to the size its grid covers, not yet normalized.
struct Resized {
  RgbImage image;
  Grid grid;
};

// The resampling filter of `backend`.
inline ResizeFilter filter_of(ImageBackend backend) {
  return backend == ImageBackend::kTorchvision ? ResizeFilter::kBicubicTorch : ResizeFilter::kBicubic;
}

class ImageTransform {
 public:
  explicit ImageTransform(ProcessorConfig config);

  const ProcessorConfig& config() const { return config_; }
  int row_elements() const { return vision::row_elements(config_.profile, config_.output); }
  std::size_t row_bytes() const { return static_cast<std::size_t>(row_elements()) * element_size(config_.output); }

  // The grid an image of this header will get (EXIF orientation honoured per the policy).
  Result<Grid> plan(const ImageInfo& info) const;
  Result<Grid> plan(int height, int width) const;

  // Decodes, resizes and writes the rows into `dest`, which holds room for `capacity_rows`
  // rows; kOutOfRange if the image needs more.
  Result<Grid> process(std::span<const std::uint8_t> encoded, void* dest, std::int64_t capacity_rows) const;
  // The same from RGB pixels already decoded.
  Result<Grid> process_rgb(const RgbImage& image, void* dest, std::int64_t capacity_rows) const;

  // The two halves of process(), for a loader that holds images between them: decode and
  // resize to the grid (3 bytes a pixel, a fraction of the rows' size), then normalize and
  // patchify into `dest` (grid.rows() rows), e.g. straight into a batch buffer.
  Result<Resized> resize(std::span<const std::uint8_t> encoded) const;
  // The same for an image whose header was probed already (`info` from probe(encoded)).
  Result<Resized> resize(std::span<const std::uint8_t> encoded, const ImageInfo& info) const;
  void write(const Resized& image, void* dest) const;

  // The DCT-domain reduction fast mode uses for a JPEG of `info` (1 when none applies).
  int jpeg_scale_denom(const ImageInfo& info) const;

 private:
  // JPEG rows decoded in chunks of this many (a multiple of the horizontal pass's five).
  static constexpr int kStreamRows = 20;

  // A JPEG that needs no orientation, no DCT reduction and Pillow's horizontal-first order is
  // resized while it decodes: each chunk of rows goes through the horizontal pass while it is
  // still in cache, and the full-size image is never held. nullopt where that does not apply
  // (resize() then decodes the whole image first); the output is identical either way.
  Result<std::optional<Resized>> resize_streaming(std::span<const std::uint8_t> encoded, const ImageInfo& info,
                                                  const DecodeOptions& decode, Size size) const;

  ProcessorConfig config_;
  NormalizeTable table_;
};

}  // namespace mmfeed::vision
