#include "vision/processor.h"

#include <vector>

namespace mmfeed::vision {

ImageProcessor::ImageProcessor(ProcessorConfig config) : config_(std::move(config)), table_(config_.profile) {}

Result<Grid> ImageProcessor::plan(int height, int width) const {
  MMFEED_ASSIGN_OR_RETURN(Size size, smart_resize(height, width, config_.profile));
  return grid_for(size, config_.profile);
}

Result<Grid> ImageProcessor::plan(const ImageInfo& info) const {
  const bool upright = config_.decode.exif == ExifPolicy::kApply;
  return plan(upright ? info.upright_height() : info.height, upright ? info.upright_width() : info.width);
}

Result<Grid> ImageProcessor::process(std::span<const std::uint8_t> encoded, void* dest, std::int64_t capacity_rows) const {
  MMFEED_ASSIGN_OR_RETURN(RgbImage image, decode_rgb(encoded, config_.decode));
  return process_rgb(image, dest, capacity_rows);
}

Result<Grid> ImageProcessor::process_rgb(const RgbImage& image, void* dest, std::int64_t capacity_rows) const {
  const ModelProfile& p = config_.profile;
  MMFEED_ASSIGN_OR_RETURN(Size size, smart_resize(image.height, image.width, p));
  const Grid grid = grid_for(size, p);
  if (grid.rows() > capacity_rows) {
    return Error(ErrorCode::kOutOfRange, "image needs " + std::to_string(grid.rows()) + " rows, the buffer holds " +
                                             std::to_string(capacity_rows));
  }
  if (size.height == image.height && size.width == image.width) {
    patchify(image.pixels.data(), grid, p, table_, config_.output, dest);
    return grid;
  }
  std::vector<std::uint8_t> resized(static_cast<std::size_t>(size.width) * size.height * 3);
  resample_u8(image.pixels.data(), image.width, image.height, 3, resized.data(), size.width, size.height,
              config_.filter, config_.kernel);
  patchify(resized.data(), grid, p, table_, config_.output, dest);
  return grid;
}

}  // namespace mmfeed::vision
