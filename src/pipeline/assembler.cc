#include "pipeline/assembler.h"

#include <algorithm>

#include "audio/features.h"
#include "pipeline/config.h"

namespace mmfeed::pipeline {

namespace {

Tensor::DType pixel_dtype(Pixels type) {
  switch (type) {
    case Pixels::kBFloat16: return Tensor::DType::kBFloat16;
    case Pixels::kUInt8: return Tensor::DType::kUInt8;
    case Pixels::kFloat32: break;
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
  const bool thd = packed && layout.format == PackedFormat::kThd;
  const bool hf = packed && !thd;
  AssembledBatch out;
  Batch& b = out.batch;
  std::size_t L = 0, total = 0, rows = 0, image_count = 0, video_rows = 0, video_count = 0;
  std::size_t longest = 0, longest_span = 0, clip_count = 0;
  std::int64_t longest_clip = 0;
  for (const auto& w : samples) {
    const std::size_t len = w->input_ids.size(), span = packed_span(len, layout.format, layout.pad_to_multiple_of);
    L = std::max(L, len);
    total += thd ? span : len;
    longest = std::max(longest, len);
    longest_span = std::max(longest_span, span);
    for (const vision::Grid& g : w->grids) rows += static_cast<std::size_t>(g.rows());
    for (const vision::VideoPlan& p : w->video_plans) video_rows += static_cast<std::size_t>(p.grid.rows());
    image_count += w->grids.size();
    video_count += w->video_plans.size();
    for (const AudioClip& a : w->audio) {
      ++clip_count;
      longest_clip = std::max(longest_clip, a.valid_frames);
    }
    b.sample_ids.push_back(w->id);
  }
  const std::size_t multiple = thd ? 1 : std::max<std::size_t>(layout.pad_to_multiple_of, 1);
  L = (L + multiple - 1) / multiple * multiple;
  const auto n = static_cast<std::int64_t>(samples.size());
  const std::int64_t B = packed ? 1 : n;
  const std::int64_t T = static_cast<std::int64_t>(packed ? (total + multiple - 1) / multiple * multiple : L);
  // transformers' packed row: the tail padding is a sequence of its own, as its positions say.
  const std::int64_t segments = n + (hf && static_cast<std::size_t>(T) > total ? 1 : 0);
  const auto width = static_cast<std::int64_t>(images.row_elements());
  const auto video_width = static_cast<std::int64_t>(videos.row_elements());
  const Tensor::DType pixel_type = pixel_dtype(images.config().output);
  const Tensor::DType video_pixel_type = pixel_dtype(videos.output());
  const bool seconds = video_count > 0 && (videos.profile().tokens_per_second > 0 || layout.omni);
  // Qwen2.5-Omni pads every clip to its fixed length, 30,000 frames, unless asked for the longest.
  const std::int64_t frames = layout.audio_padding == AudioPadding::kLongest
                                  ? longest_clip
                                  : static_cast<std::int64_t>(audio::frames_of(audio::kFixedSamples));
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
  const int mask_at = packed ? -1 : add("attention_mask", Tensor::DType::kInt64, {B, T});
  const int loss_mask_at = thd ? add("loss_mask", Tensor::DType::kFloat32, {B, T}) : -1;
  const int types_at = add("mm_token_type_ids", Tensor::DType::kInt64, {B, T});
  // Images as videos: only a batch that holds one has their tensors (the processors return none
  // without images, and the models' vision towers fail on empty ones).
  const auto images_n = static_cast<std::int64_t>(image_count);
  const int pixels_at = images_n > 0 ? add("pixel_values", pixel_type, {static_cast<std::int64_t>(rows), width}) : -1;
  const int grids_at = images_n > 0 ? add("image_grid_thw", Tensor::DType::kInt64, {images_n, 3}) : -1;
  // Position rows: padded, the three mrope rows (or none); packed, transformers' text row before
  // them (thd: the mrope rows alone), or the text row alone without mrope.
  const std::int64_t mrope_rows = layout.mrope ? 3 : 0;
  const std::int64_t text_rows = packed && (hf || !layout.mrope) ? 1 : 0;
  const std::int64_t position_rows = text_rows + mrope_rows;
  const int positions_at = position_rows == 0   ? -1
                           : position_rows == 1 ? add("position_ids", Tensor::DType::kInt64, {B, T})
                                                : add("position_ids", Tensor::DType::kInt64, {position_rows, B, T});
  const int cu_at = hf    ? add("cu_seq_lens_q", Tensor::DType::kInt32, {segments + 1})
                    : thd ? add("cu_seqlens", Tensor::DType::kInt32, {n + 1})
                          : -1;
  const int cu2_at = hf    ? add("cu_seq_lens_k", Tensor::DType::kInt32, {segments + 1})
                     : thd ? add("cu_seqlens_padded", Tensor::DType::kInt32, {n + 1})
                           : -1;
  const int seq_idx_at = hf && layout.seq_idx ? add("seq_idx", Tensor::DType::kInt32, {B, T}) : -1;
  const auto v = static_cast<std::int64_t>(video_count);
  const int video_pixels_at =
      v > 0 ? add("pixel_values_videos", video_pixel_type, {static_cast<std::int64_t>(video_rows), video_width}) : -1;
  const int video_grids_at = v > 0 ? add("video_grid_thw", Tensor::DType::kInt64, {v, 3}) : -1;
  const int seconds_at =
      seconds ? add(layout.omni ? "video_second_per_grid" : "second_per_grid_ts", Tensor::DType::kFloat32, {v}) : -1;
  const auto clips = static_cast<std::int64_t>(clip_count);
  const int features_at =
      clips > 0 ? add("input_features", Tensor::DType::kFloat32, {clips, audio::kMelBins, frames}) : -1;
  const int feature_mask_at = clips > 0 ? add("feature_attention_mask", Tensor::DType::kInt32, {clips, frames}) : -1;
  auto buffer = std::make_shared<core::Buffer>(pool.acquire(offset));
  std::byte* base = buffer->data();
  b.set_buffer(buffer, base, buffer->capacity());
  auto at = [&](int i) { return i < 0 ? nullptr : base + b.tensors[static_cast<std::size_t>(i)].offset; };
  auto int64_at = [&](int i) { return reinterpret_cast<std::int64_t*>(at(i)); };
  auto int32_at = [&](int i) { return reinterpret_cast<std::int32_t*>(at(i)); };
  auto float_at = [&](int i) { return reinterpret_cast<float*>(at(i)); };
  std::int64_t *ids = int64_at(ids_at), *labels = int64_at(labels_at), *mask = int64_at(mask_at);
  std::int64_t *types = int64_at(types_at), *grids = int64_at(grids_at), *positions = int64_at(positions_at);
  std::int32_t *cu = int32_at(cu_at), *cu2 = int32_at(cu2_at), *seq_idx = int32_at(seq_idx_at);
  float* loss_mask = float_at(loss_mask_at);
  std::int64_t* video_grids = int64_at(video_grids_at);
  std::byte *pixels = at(pixels_at), *video_pixels = at(video_pixels_at);
  float* second_per_grid = float_at(seconds_at);
  float* features = float_at(features_at);
  std::int32_t* feature_mask = int32_at(feature_mask_at);
  const auto plane = static_cast<std::size_t>(B * T);  // one row of position_ids
  std::size_t cursor = 0;                              // packed: where the next sample starts
  if (cu) cu[0] = cu2[0] = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Work& w = *samples[i];
    const std::size_t len = w.input_ids.size();
    const std::size_t row_start = packed ? cursor : i * L;
    // Padded: the row. thd: the sample's own padding. hf: the sample; the last one also writes
    // the row's tail, whose positions count from 0 again (a sequence of its own).
    const std::size_t span_len = !packed                  ? L
                                 : thd                    ? packed_span(len, layout.format, layout.pad_to_multiple_of)
                                 : i + 1 < samples.size() ? len
                                                          : static_cast<std::size_t>(T) - cursor;
    for (std::size_t j = 0; j < span_len; ++j) {
      const bool real = j < len;
      const std::size_t at_j = row_start + j;
      const std::int64_t id = real ? w.input_ids[j] : layout.pad_id;
      ids[at_j] = id;
      types[at_j] = id == layout.image_pad_id ? 1 : id == layout.video_pad_id ? 2 : id == layout.audio_pad_id ? 3 : 0;
      std::int64_t label = real ? w.labels[j] : text::kIgnoreIndex;
      if (thd) label = j + 1 < len ? w.labels[j + 1] : text::kIgnoreIndex;  // Megatron's labels come shifted
      if (hf && j == 0) label = text::kIgnoreIndex;
      labels[at_j] = label;
      if (mask) mask[at_j] = real ? 1 : 0;
      if (loss_mask) loss_mask[at_j] = label == text::kIgnoreIndex ? 0.0F : 1.0F;
      if (!positions) continue;
      // Padding sits at position 0, but for an hf row's tail, which counts on from 0 as a
      // sequence of its own.
      std::int64_t text_position = 0;
      if (real) {
        text_position = static_cast<std::int64_t>(j);
      } else if (hf) {
        text_position = static_cast<std::int64_t>(j - len);
      }
      if (text_rows > 0) positions[at_j] = text_position;
      for (std::int64_t axis = 0; axis < mrope_rows; ++axis) {
        positions[static_cast<std::size_t>(text_rows + axis) * plane + at_j] =
            real ? w.mrope[static_cast<std::size_t>(axis) * len + j] : text_position;
      }
    }
    cursor += span_len;
    if (hf) {
      cu[i + 1] = cu2[i + 1] = static_cast<std::int32_t>(cursor - (span_len - len));
    } else if (thd) {
      cu[i + 1] = cu[i] + static_cast<std::int32_t>(len);
      cu2[i + 1] = static_cast<std::int32_t>(cursor);
    }
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
    // Each clip's frames, then its silence (every frame past those kept is its last) to `frames`.
    const auto F = static_cast<std::size_t>(frames);
    for (const AudioClip& a : w.audio) {
      const std::size_t kept = std::min(a.frames, F);
      for (int m = 0; m < audio::kMelBins; ++m) {
        const float* row = a.features.data() + static_cast<std::size_t>(m) * a.frames;
        std::copy_n(row, kept, features);
        std::fill(features + kept, features + F, row[a.frames - 1]);
        features += F;
      }
      const auto valid = std::min(static_cast<std::size_t>(a.valid_frames), F);
      std::fill_n(feature_mask, valid, 1);
      std::fill(feature_mask + valid, feature_mask + F, 0);
      feature_mask += F;
    }
  }
  if (hf) {
    if (segments > n) cu[segments] = cu2[segments] = static_cast<std::int32_t>(T);
    for (std::int64_t k = 0; seq_idx && k < segments; ++k) {
      std::fill(seq_idx + cu[k], seq_idx + cu[k + 1], static_cast<std::int32_t>(k));
    }
    std::int64_t max_length = 0;
    for (std::int64_t k = 0; k < segments; ++k) max_length = std::max<std::int64_t>(max_length, cu[k + 1] - cu[k]);
    b.scalars = {{"max_length_q", max_length}, {"max_length_k", max_length}};
  } else if (thd) {
    b.scalars = {{"max_seqlen", static_cast<std::int64_t>(longest)},
                 {"max_seqlen_padded", static_cast<std::int64_t>(longest_span)}};
  }
  return out;
}

}  // namespace mmfeed::pipeline
