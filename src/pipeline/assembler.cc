#include "pipeline/assembler.h"

#include <algorithm>

namespace mmfeed::pipeline {

void write_pixels(const PixelJob& job, const vision::ImageProcessor& proc) { proc.write(*job.image, job.dest); }

AssembledBatch assemble_batch(const std::vector<std::unique_ptr<Work>>& samples, const BatchLayout& layout,
                              const vision::ImageProcessor& proc, core::BufferPool& pool) {
  const bool packed = layout.packed;
  AssembledBatch out;
  Batch& b = out.batch;
  std::size_t L = 0, total = 0, rows = 0, images = 0;
  for (const auto& w : samples) {
    L = std::max(L, w->input_ids.size());
    total += w->input_ids.size();
    for (const vision::Grid& g : w->grids) rows += static_cast<std::size_t>(g.rows());
    images += w->grids.size();
    b.sample_ids.push_back(w->id);
  }
  const std::size_t multiple = std::max<std::size_t>(layout.pad_to_multiple_of, 1);
  L = (L + multiple - 1) / multiple * multiple;
  const auto n = static_cast<std::int64_t>(samples.size());
  const std::int64_t B = packed ? 1 : n;
  const std::int64_t T = static_cast<std::int64_t>(packed ? (total + multiple - 1) / multiple * multiple : L);
  const auto width = static_cast<std::int64_t>(proc.row_elements());
  std::size_t offset = 0;
  auto add = [&](const char* name, Tensor::DType dtype, std::vector<std::int64_t> shape) {
    Tensor t{name, dtype, std::move(shape), offset};
    offset += (t.bytes() + 63) / 64 * 64;
    b.tensors.push_back(std::move(t));
  };
  add("input_ids", Tensor::DType::kInt64, {B, T});
  add("labels", Tensor::DType::kInt64, {B, T});
  add("attention_mask", Tensor::DType::kInt64, {B, T});
  add("pixel_values", Tensor::DType::kFloat32, {static_cast<std::int64_t>(rows), width});
  add("image_grid_thw", Tensor::DType::kInt64, {static_cast<std::int64_t>(images), 3});
  if (layout.mrope) {
    add("position_ids", Tensor::DType::kInt64, {3, B, T});
  } else if (packed) {
    add("position_ids", Tensor::DType::kInt64, {B, T});
  }
  if (packed) add("cu_seqlens", Tensor::DType::kInt64, {n + 1});
  auto buffer = std::make_shared<core::Buffer>(pool.acquire(offset));
  std::byte* base = buffer->data();
  b.set_buffer(buffer, base, buffer->capacity());
  auto at = [&](std::size_t i) { return reinterpret_cast<std::int64_t*>(base + b.tensors[i].offset); };
  std::int64_t *ids = at(0), *labels = at(1), *mask = at(2), *grids = at(4);
  std::int64_t* positions = b.tensors.size() > 5 && b.tensors[5].name == "position_ids" ? at(5) : nullptr;
  std::int64_t* cu = packed ? at(b.tensors.size() - 1) : nullptr;
  auto* pixels = reinterpret_cast<float*>(base + b.tensors[3].offset);
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
      out.pixels.push_back({&r, pixels});
      pixels += static_cast<std::size_t>(r.grid.rows()) * static_cast<std::size_t>(width);
    }
    for (const vision::Grid& g : w.grids) {
      *grids++ = g.t;
      *grids++ = g.h;
      *grids++ = g.w;
    }
  }
  return out;
}

}  // namespace mmfeed::pipeline
