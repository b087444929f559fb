#include "vision/image_transform.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/scratch.h"

namespace mmfeed::vision {

namespace {

Status check_capacity(const Grid& grid, std::int64_t capacity_rows) {
  if (grid.rows() <= capacity_rows) return ok_status();
  return Error(ErrorCode::kOutOfRange, "image needs " + std::to_string(grid.rows()) + " rows, the buffer holds " +
                                           std::to_string(capacity_rows));
}

}  // namespace

ImageTransform::ImageTransform(ProcessorConfig config)
    : config_(std::move(config)), table_(config_.profile, config_.backend) {}

Result<Grid> ImageTransform::plan(int height, int width) const {
  MMFEED_ASSIGN_OR_RETURN(Size size, smart_resize(height, width, config_.profile));
  return grid_for(size, config_.profile);
}

Result<Grid> ImageTransform::plan(const ImageInfo& info) const {
  // The decoder's limit on the header's pixels, checked here too: a plan sizes the batch and the
  // tokens, and a bomb planned at max_pixels would be refused for those, not for what it is.
  MMFEED_RETURN_IF_ERROR(check_image_size(info.width, info.height, config_.decode));
  const bool upright = config_.decode.exif == ExifPolicy::kApply;
  return plan(upright ? info.upright_height() : info.height, upright ? info.upright_width() : info.width);
}

int ImageTransform::jpeg_scale_denom(const ImageInfo& info) const {
  if (!config_.fast_jpeg || info.format != ImageFormat::kJpeg) return 1;
  const bool upright = config_.decode.exif == ExifPolicy::kApply;
  const int h = upright ? info.upright_height() : info.height;
  const int w = upright ? info.upright_width() : info.width;
  auto size = smart_resize(h, w, config_.profile);
  if (!size.ok()) return 1;
  for (int denom : {8, 4, 2}) {
    const double rh = static_cast<double>(h) / denom / size->height;
    const double rw = static_cast<double>(w) / denom / size->width;
    if (rh >= config_.fast_min_remaining && rw >= config_.fast_min_remaining) return denom;
  }
  return 1;
}

Result<Resized> ImageTransform::resize(std::span<const std::uint8_t> encoded) const {
  MMFEED_ASSIGN_OR_RETURN(ImageInfo info, probe(encoded));
  return resize(encoded, info);
}

Result<std::optional<Resized>> ImageTransform::resize_streaming(std::span<const std::uint8_t> encoded,
                                                                const ImageInfo& info, const DecodeOptions& decode,
                                                                Size size) const {
  const bool rotated = decode.exif == ExifPolicy::kApply && info.orientation != 1;
  if (info.format != ImageFormat::kJpeg || rotated || decode.jpeg_scale_denom != 1 || size.width == info.width ||
      !horizontal_first(info.width, info.height, size.width, size.height, filter_of(config_.backend))) {
    return std::optional<Resized>();
  }
  Resized out;
  out.grid = grid_for(size, config_.profile);
  out.image.width = size.width;
  out.image.height = size.height;
  out.image.pixels.resize(static_cast<std::size_t>(size.width) * size.height * 3);
  RowResampler rows(info.width, info.height, size.width, size.height, 3, filter_of(config_.backend), config_.kernel,
                    out.image.pixels.data());
  MMFEED_ASSIGN_OR_RETURN(bool decoded,
                          decode_jpeg_rows(encoded, decode, info.width, info.height, rows.first_row(), kStreamRows,
                                           [&](const std::uint8_t* chunk, int y, int n) { rows.push(chunk, y, n); }));
  if (!decoded) return std::optional<Resized>();
  return std::optional<Resized>(std::move(out));
}

Result<Resized> ImageTransform::resize(std::span<const std::uint8_t> encoded, const ImageInfo& info) const {
  // The size comes from the header (in fast mode, the full-size one, not the reduced decode).
  DecodeOptions decode = config_.decode;
  decode.jpeg_scale_denom = jpeg_scale_denom(info);
  const bool upright = config_.decode.exif == ExifPolicy::kApply;
  MMFEED_ASSIGN_OR_RETURN(Size size, smart_resize(upright ? info.upright_height() : info.height,
                                                  upright ? info.upright_width() : info.width, config_.profile));
  MMFEED_ASSIGN_OR_RETURN(std::optional<Resized> streamed, resize_streaming(encoded, info, decode, size));
  if (streamed) return std::move(*streamed);
  MMFEED_ASSIGN_OR_RETURN(RgbImage image, decode_rgb(encoded, decode));
  Resized out;
  out.grid = grid_for(size, config_.profile);
  if (size.height == image.height && size.width == image.width) {
    out.image = std::move(image);
    return out;
  }
  out.image.width = size.width;
  out.image.height = size.height;
  out.image.pixels.resize(static_cast<std::size_t>(size.width) * size.height * 3);
  resample_u8(image.pixels.data(), image.width, image.height, 3, out.image.pixels.data(), size.width, size.height,
              filter_of(config_.backend), config_.kernel);
  return out;
}

void ImageTransform::write(const Resized& image, void* dest) const {
  patchify(image.image.pixels.data(), image.grid, config_.profile, table_, config_.output, dest, config_.kernel);
}

Result<Grid> ImageTransform::process(std::span<const std::uint8_t> encoded, void* dest,
                                     std::int64_t capacity_rows) const {
  MMFEED_ASSIGN_OR_RETURN(Resized image, resize(encoded));
  MMFEED_RETURN_IF_ERROR(check_capacity(image.grid, capacity_rows));
  write(image, dest);
  return image.grid;
}

Result<Grid> ImageTransform::process_rgb(const RgbImage& image, void* dest, std::int64_t capacity_rows) const {
  MMFEED_ASSIGN_OR_RETURN(Size size, smart_resize(image.height, image.width, config_.profile));
  const ModelProfile& p = config_.profile;
  const Grid grid = grid_for(size, p);
  MMFEED_RETURN_IF_ERROR(check_capacity(grid, capacity_rows));
  if (size.height == image.height && size.width == image.width) {
    patchify(image.pixels.data(), grid, p, table_, config_.output, dest, config_.kernel);
    return grid;
  }
  core::ScratchVector<std::uint8_t> resized(static_cast<std::size_t>(size.width) * size.height * 3);
  resample_u8(image.pixels.data(), image.width, image.height, 3, resized.data(), size.width, size.height,
              filter_of(config_.backend), config_.kernel);
  patchify(resized.data(), grid, p, table_, config_.output, dest, config_.kernel);
  return grid;
}

}  // namespace mmfeed::vision
