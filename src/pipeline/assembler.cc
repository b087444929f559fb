#include "pipeline/assembler.h"

#include <algorithm>

namespace mmfeed::pipeline {

namespace {

Tensor::DType pixel_dtype(vision::OutputType type) {
  switch (type) {
    case vision::OutputType::kBFloat16: return Tensor::DType::kBFloat16;
    case vision::OutputType::kUInt8: return Tensor::DType::kUInt8;
    case vision::OutputType::kFloat32: break;
  }
  return Tensor::DType::kFloat32;
}

}  // namespace

void write_pixels(const PixelJob& job, const vision::ImageProcessor& images, const vision::VideoProcessor& videos) {
  if (job.image != nullptr) {
    images.write(*job.image, job.dest);
  } else {
    videos.write(*job.video, job.dest);
  }
}

AssembledBatch assemble_batch(const std::vector<std::unique_ptr<Work>>& samples, const BatchLayout& layout,
                              const vision::ImageProcessor& images, const vision::VideoProcessor& videos,
                              core::BufferPool& pool) {
  const bool packed = layout.packed;
  AssembledBatch out;
  Batch& b = out.batch;
  std::size_t L = 0, total = 0, rows = 0, image_count = 0, video_rows = 0, video_count = 0;
  for (const auto& w : samples) {
    L = std::max(L, w->input_ids.size());
    total += w->input_ids.size();
    for (const vision::Grid& g : w->grids) rows += static_cast<std::size_t>(g.rows());
    for (const vision::VideoPlan& p : w->video_plans) video_rows += static_cast<std::size_t>(p.grid.rows());
    image_count += w->grids.size();
    video_count += w->video_plans.size();
    b.sample_ids.push_back(w->id);
  }
  const std::size_t multiple = std::max<std::size_t>(layout.pad_to_multiple_of, 1);
  L = (L + multiple - 1) / multiple * multiple;
  const auto n = static_cast<std::int64_t>(samples.size());
  const std::int64_t B = packed ? 1 : n;
  const std::int64_t T = static_cast<std::int64_t>(packed ? (total + multiple - 1) / multiple * multiple : L);
  const auto width = static_cast<std::int64_t>(images.row_elements());
  const auto video_width = static_cast<std::int64_t>(videos.row_elements());
  const Tensor::DType pixel_type = pixel_dtype(images.config().output);
  const Tensor::DType video_pixel_type = pixel_dtype(videos.output());
  const bool seconds = video_count > 0 && videos.profile().tokens_per_second > 0;
  std::size_t offset = 0;
  // Each tensor's place in b.tensors, or -1 when the batch has none.
  auto add = [&](const char* name, Tensor::DType dtype, std::vector<std::int64_t> shape) {
    Tensor t{name, dtype, std::move(shape), offset};
    offset += (t.bytes() + 63) / 64 * 64;
    b.tensors.push_back(std::move(t));
    return static_cast<int>(b.tensors.size()) - 1;
  };
  const int ids_at = add("input_ids", Tensor::DType::kInt64, {B, T});
  const int labels_at = add("labels", Tensor::DType::kInt64, {B, T});
  const int mask_at = add("attention_mask", Tensor::DType::kInt64, {B, T});
  const int pixels_at = add("pixel_values", pixel_type, {static_cast<std::int64_t>(rows), width});
  const int grids_at = add("image_grid_thw", Tensor::DType::kInt64, {static_cast<std::int64_t>(image_count), 3});
  const int positions_at = layout.mrope ? add("position_ids", Tensor::DType::kInt64, {3, B, T})
                           : packed     ? add("position_ids", Tensor::DType::kInt64, {B, T})
                                        : -1;
  const int cu_at = packed ? add("cu_seqlens", Tensor::DType::kInt64, {n + 1}) : -1;
  const auto v = static_cast<std::int64_t>(video_count);
  const int video_pixels_at =
      v > 0 ? add("pixel_values_videos", video_pixel_type, {static_cast<std::int64_t>(video_rows), video_width})
            : -1;
  const int video_grids_at = v > 0 ? add("video_grid_thw", Tensor::DType::kInt64, {v, 3}) : -1;
  const int seconds_at = seconds ? add("second_per_grid_ts", Tensor::DType::kFloat32, {v}) : -1;
  auto buffer = std::make_shared<core::Buffer>(pool.acquire(offset));
  std::byte* base = buffer->data();
  b.set_buffer(buffer, base, buffer->capacity());
  auto at = [&](int i) { return i < 0 ? nullptr : base + b.tensors[static_cast<std::size_t>(i)].offset; };
  auto int64_at = [&](int i) { return reinterpret_cast<std::int64_t*>(at(i)); };
  auto float_at = [&](int i) { return reinterpret_cast<float*>(at(i)); };
  std::int64_t *ids = int64_at(ids_at), *labels = int64_at(labels_at), *mask = int64_at(mask_at);
  std::int64_t *grids = int64_at(grids_at), *positions = int64_at(positions_at), *cu = int64_at(cu_at);
  std::int64_t* video_grids = int64_at(video_grids_at);
  std::byte *pixels = at(pixels_at), *video_pixels = at(video_pixels_at);
  float* second_per_grid = float_at(seconds_at);
  std::size_t cursor = 0;  // packed: where the next sample starts
  if (cu) cu[0] = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Work& w = *samples[i];
    const std::size_t len = w.input_ids.size();
    const std::size_t row_start = packed ? cursor : i * L;
    // Packed, the last sample also writes the row's padding tail (pad_to_multiple_of).
    const std::size_t span_len = !packed ? L : i + 1 < samples.size() ? len : static_cast<std::size_t>(T) - cursor;
    for (std::size_t j = 0; j < span_len; ++j) {
      const bool real = j < len;
      ids[row_start + j] = real ? w.input_ids[j] : layout.pad_id;
      labels[row_start + j] = real ? w.labels[j] : text::kIgnoreIndex;
      mask[row_start + j] = real ? 1 : 0;
      if (positions && layout.mrope) {
        for (std::size_t axis = 0; axis < 3; ++axis) {
          positions[axis * static_cast<std::size_t>(B * T) + row_start + j] = real ? w.mrope[axis * len + j] : 0;
        }
      } else if (positions) {
        positions[row_start + j] = real ? static_cast<std::int64_t>(j) : 0;
      }
    }
    cursor += len;
    if (cu) cu[i + 1] = static_cast<std::int64_t>(cursor);
    for (const vision::Resized& r : w.resized) {
      out.pixels.push_back({&r, nullptr, pixels});
      pixels += static_cast<std::size_t>(r.grid.rows()) * images.row_bytes();
    }
    for (const vision::Grid& g : w.grids) {
      *grids++ = g.t;
      *grids++ = g.h;
      *grids++ = g.w;
    }
    for (const vision::ResizedVideo& r : w.resized_videos) {
      out.pixels.push_back({nullptr, &r, video_pixels});
      video_pixels += static_cast<std::size_t>(r.grid.rows()) * videos.row_bytes();
    }
    for (const vision::VideoPlan& p : w.video_plans) {
      *video_grids++ = p.grid.t;
      *video_grids++ = p.grid.h;
      *video_grids++ = p.grid.w;
      if (second_per_grid) *second_per_grid++ = static_cast<float>(vision::second_per_grid_t(videos.profile(), p));
    }
  }
  return out;
}

}  // namespace mmfeed::pipeline
