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

// The sizes a batch of samples needs, measured before its buffer is planned.
struct Extent {
  std::int64_t n = 0;                         // samples
  std::int64_t B = 0, T = 0;                  // rows (packed: 1) and tokens a row
  std::int64_t segments = 0;                  // an hf row's sequences: the samples, and its tail when it has one
  std::size_t longest = 0, longest_span = 0;  // the longest sample, before and after its own padding (thd)
  std::size_t image_rows = 0, images = 0, video_rows = 0, videos = 0, clips = 0;
  std::int64_t frames = 0;  // each clip's input_features frames
  bool seconds = false;     // the videos' seconds per group
};

Extent measure(const std::vector<std::unique_ptr<Work>>& samples, const BatchLayout& layout) {
  const bool thd = layout.packed && layout.format == PackedFormat::kThd;
  Extent e;
  std::size_t total = 0;
  std::int64_t longest_clip = 0;
  for (const auto& w : samples) {
    const std::size_t len = w->input_ids.size(), span = packed_span(len, layout.format, layout.pad_to_multiple_of);
    total += thd ? span : len;
    e.longest = std::max(e.longest, len);
    e.longest_span = std::max(e.longest_span, span);
    for (const vision::Grid& g : w->grids) e.image_rows += static_cast<std::size_t>(g.rows());
    for (const vision::VideoPlan& p : w->video_plans) e.video_rows += static_cast<std::size_t>(p.grid.rows());
    e.images += w->grids.size();
    e.videos += w->video_plans.size();
    for (const AudioClip& a : w->audio) {
      ++e.clips;
      longest_clip = std::max(longest_clip, a.valid_frames);
    }
  }
  const std::size_t multiple = thd ? 1 : std::max<std::size_t>(layout.pad_to_multiple_of, 1);
  auto round_up = [&](std::size_t x) { return static_cast<std::int64_t>((x + multiple - 1) / multiple * multiple); };
  e.n = static_cast<std::int64_t>(samples.size());
  e.B = layout.packed ? 1 : e.n;
  e.T = layout.packed ? round_up(total) : round_up(e.longest);
  // transformers' packed row: the tail padding is a sequence of its own, as its positions say.
  const bool hf = layout.packed && !thd;
  e.segments = e.n + (hf && static_cast<std::size_t>(e.T) > total ? 1 : 0);
  e.seconds = e.videos > 0 && layout.second_per_grid_ts;
  // Qwen2.5-Omni pads every clip to its fixed length, 30,000 frames, unless asked for the longest.
  e.frames = layout.audio_padding == AudioPadding::kLongest
                 ? longest_clip
                 : static_cast<std::int64_t>(audio::frames_of(audio::kFixedSamples));
  return e;
}

// The batch's tensors in its buffer, each null when the batch has none.
struct Views {
  std::int64_t *ids = nullptr, *labels = nullptr, *mask = nullptr, *types = nullptr;
  float* loss_mask = nullptr;
  std::int64_t* positions = nullptr;
  std::int64_t text_rows = 0, mrope_rows = 0;  // position rows: transformers' text row, the mrope rows
  std::size_t plane = 0;                       // one row of position_ids
  std::int32_t *cu = nullptr, *cu2 = nullptr, *seq_idx = nullptr;
  std::byte* pixels = nullptr;
  std::int64_t* grids = nullptr;
  std::byte* video_pixels = nullptr;
  std::int64_t* video_grids = nullptr;
  float* second_per_grid = nullptr;
  float* features = nullptr;
  std::int32_t* feature_mask = nullptr;
};

// Declares the batch's tensors (their names, types, shapes and offsets in b.tensors), takes the
// buffer that holds them all from `pool`, and returns where each lives.
Views place_tensors(Batch& b, const Extent& e, const BatchLayout& layout, const vision::ImageTransform& images,
                    const vision::VideoProcessor& videos, core::BufferPool& pool) {
  const bool thd = layout.packed && layout.format == PackedFormat::kThd;
  const bool hf = layout.packed && !thd;
  const std::int64_t B = e.B, T = e.T;
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
  const int mask_at = layout.packed ? -1 : add("attention_mask", Tensor::DType::kInt64, {B, T});
  const int loss_mask_at = thd ? add("loss_mask", Tensor::DType::kFloat32, {B, T}) : -1;
  const int types_at = add("mm_token_type_ids", Tensor::DType::kInt64, {B, T});
  // Images as videos: only a batch that holds one has their tensors (the processors return none
  // without images, and the models' vision towers fail on empty ones).
  const auto images_n = static_cast<std::int64_t>(e.images);
  const int pixels_at =
      images_n > 0 ? add("pixel_values", pixel_dtype(images.config().output),
                         {static_cast<std::int64_t>(e.image_rows), static_cast<std::int64_t>(images.row_elements())})
                   : -1;
  const int grids_at = images_n > 0 ? add("image_grid_thw", Tensor::DType::kInt64, {images_n, 3}) : -1;
  // Position rows: padded, the three mrope rows (or none); packed, transformers' text row before
  // them (thd: the mrope rows alone), or the text row alone without mrope.
  Views v;
  v.mrope_rows = layout.mrope ? 3 : 0;
  v.text_rows = layout.packed && (hf || !layout.mrope) ? 1 : 0;
  v.plane = static_cast<std::size_t>(B * T);
  const std::int64_t position_rows = v.text_rows + v.mrope_rows;
  const int positions_at = position_rows == 0   ? -1
                           : position_rows == 1 ? add("position_ids", Tensor::DType::kInt64, {B, T})
                                                : add("position_ids", Tensor::DType::kInt64, {position_rows, B, T});
  const int cu_at = hf    ? add("cu_seq_lens_q", Tensor::DType::kInt32, {e.segments + 1})
                    : thd ? add("cu_seqlens", Tensor::DType::kInt32, {e.n + 1})
                          : -1;
  const int cu2_at = hf    ? add("cu_seq_lens_k", Tensor::DType::kInt32, {e.segments + 1})
                     : thd ? add("cu_seqlens_padded", Tensor::DType::kInt32, {e.n + 1})
                           : -1;
  const int seq_idx_at = hf && layout.seq_idx ? add("seq_idx", Tensor::DType::kInt32, {B, T}) : -1;
  const auto vn = static_cast<std::int64_t>(e.videos);
  const int video_pixels_at =
      vn > 0 ? add("pixel_values_videos", pixel_dtype(videos.output()),
                   {static_cast<std::int64_t>(e.video_rows), static_cast<std::int64_t>(videos.row_elements())})
             : -1;
  const int video_grids_at = vn > 0 ? add("video_grid_thw", Tensor::DType::kInt64, {vn, 3}) : -1;
  const int seconds_at =
      e.seconds ? add(layout.omni ? "video_second_per_grid" : "second_per_grid_ts", Tensor::DType::kFloat32, {vn}) : -1;
  const auto clips = static_cast<std::int64_t>(e.clips);
  const int features_at =
      clips > 0 ? add("input_features", Tensor::DType::kFloat32, {clips, audio::kMelBins, e.frames}) : -1;
  const int feature_mask_at = clips > 0 ? add("feature_attention_mask", Tensor::DType::kInt32, {clips, e.frames}) : -1;
  auto buffer = std::make_shared<core::Buffer>(pool.acquire(offset));
  std::byte* base = buffer->data();
  b.set_buffer(buffer, base, buffer->capacity());
  auto at = [&](int i) { return i < 0 ? nullptr : base + b.tensors[static_cast<std::size_t>(i)].offset; };
  auto int64_at = [&](int i) { return reinterpret_cast<std::int64_t*>(at(i)); };
  auto int32_at = [&](int i) { return reinterpret_cast<std::int32_t*>(at(i)); };
  auto float_at = [&](int i) { return reinterpret_cast<float*>(at(i)); };
  v.ids = int64_at(ids_at);
  v.labels = int64_at(labels_at);
  v.mask = int64_at(mask_at);
  v.loss_mask = float_at(loss_mask_at);
  v.types = int64_at(types_at);
  v.positions = int64_at(positions_at);
  v.cu = int32_at(cu_at);
  v.cu2 = int32_at(cu2_at);
  v.seq_idx = int32_at(seq_idx_at);
  v.pixels = at(pixels_at);
  v.grids = int64_at(grids_at);
  v.video_pixels = at(video_pixels_at);
  v.video_grids = int64_at(video_grids_at);
  v.second_per_grid = float_at(seconds_at);
  v.features = float_at(features_at);
  v.feature_mask = int32_at(feature_mask_at);
  return v;
}

// Token j of sample `w` (padding past its length) at `at` of every token tensor, with its label
// and the position its text row reads (the mrope rows read the sample's own, padding this one).
void write_token(const Views& v, const BatchLayout& layout, const Work& w, std::size_t j, std::size_t at,
                 std::int64_t label, std::int64_t text_position) {
  const std::size_t len = w.input_ids.size();
  const bool real = j < len;
  const std::int64_t id = real ? w.input_ids[j] : layout.pad_id;
  v.ids[at] = id;
  v.types[at] = id == layout.image_pad_id ? 1 : id == layout.video_pad_id ? 2 : id == layout.audio_pad_id ? 3 : 0;
  v.labels[at] = label;
  if (v.mask) v.mask[at] = real ? 1 : 0;
  if (v.loss_mask) v.loss_mask[at] = label == text::kIgnoreIndex ? 0.0F : 1.0F;
  if (!v.positions) return;
  if (v.text_rows > 0) v.positions[at] = text_position;
  for (std::int64_t axis = 0; axis < v.mrope_rows; ++axis) {
    v.positions[static_cast<std::size_t>(v.text_rows + axis) * v.plane + at] =
        real ? w.mrope[static_cast<std::size_t>(axis) * len + j] : text_position;
  }
}

// Padded: sample i's row of `row_length` tokens, its padding at position 0 and unmasked.
void write_padded_row(const Views& v, const BatchLayout& layout, const Work& w, std::size_t i, std::size_t row_length) {
  const std::size_t len = w.input_ids.size();
  for (std::size_t j = 0; j < row_length; ++j) {
    const bool real = j < len;
    write_token(v, layout, w, j, i * row_length + j, real ? w.labels[j] : text::kIgnoreIndex,
                real ? static_cast<std::int64_t>(j) : 0);
  }
}

// transformers' packed row: sample i from `cursor`, its first label -100 (no label crosses into
// it); the last sample also writes the row's tail, whose positions count from 0 again (a sequence
// of its own). Returns the next sample's start.
std::size_t write_hf_sequence(const Views& v, const BatchLayout& layout, const Work& w, std::size_t i, bool last,
                              std::size_t cursor, std::int64_t T) {
  const std::size_t len = w.input_ids.size();
  const std::size_t span = last ? static_cast<std::size_t>(T) - cursor : len;
  for (std::size_t j = 0; j < span; ++j) {
    const bool real = j < len;
    const std::int64_t label = real && j > 0 ? w.labels[j] : text::kIgnoreIndex;
    write_token(v, layout, w, j, cursor + j, label, static_cast<std::int64_t>(real ? j : j - len));
  }
  v.cu[i + 1] = v.cu2[i + 1] = static_cast<std::int32_t>(cursor + len);
  return cursor + span;
}

// Megatron's THD row: sample i from `cursor`, padded to its own multiple, labels shifted (label j
// is token j + 1's). Returns the next sample's start.
std::size_t write_thd_sequence(const Views& v, const BatchLayout& layout, const Work& w, std::size_t i,
                               std::size_t cursor) {
  const std::size_t len = w.input_ids.size();
  const std::size_t span = packed_span(len, layout.format, layout.pad_to_multiple_of);
  for (std::size_t j = 0; j < span; ++j) {
    const std::int64_t label = j + 1 < len ? w.labels[j + 1] : text::kIgnoreIndex;
    write_token(v, layout, w, j, cursor + j, label, j < len ? static_cast<std::int64_t>(j) : 0);
  }
  v.cu[i + 1] = v.cu[i] + static_cast<std::int32_t>(len);
  v.cu2[i + 1] = static_cast<std::int32_t>(cursor + span);
  return cursor + span;
}

// The sample's media: a pixel job per image and video (their rows' slots, in order), their grids
// and seconds per group, and each clip's features, then its silence (every frame past those kept
// is its last) to e.frames. Advances the views past what it wrote.
void write_media(Views& v, const Extent& e, const Work& w, const vision::ImageTransform& images,
                 const vision::VideoProcessor& videos, std::vector<PixelJob>& jobs) {
  for (const vision::Resized& r : w.resized) {
    jobs.push_back({&r, nullptr, v.pixels});
    v.pixels += static_cast<std::size_t>(r.grid.rows()) * images.row_bytes();
  }
  for (const vision::Grid& g : w.grids) {
    *v.grids++ = g.t;
    *v.grids++ = g.h;
    *v.grids++ = g.w;
  }
  for (const vision::ResizedVideo& r : w.resized_videos) {
    jobs.push_back({nullptr, &r, v.video_pixels});
    v.video_pixels += static_cast<std::size_t>(r.grid.rows()) * videos.row_bytes();
  }
  for (const vision::VideoPlan& p : w.video_plans) {
    *v.video_grids++ = p.grid.t;
    *v.video_grids++ = p.grid.h;
    *v.video_grids++ = p.grid.w;
    if (v.second_per_grid) *v.second_per_grid++ = static_cast<float>(vision::second_per_grid_t(videos.profile(), p));
  }
  const auto F = static_cast<std::size_t>(e.frames);
  for (const AudioClip& a : w.audio) {
    const std::size_t kept = std::min(a.frames, F);
    for (int m = 0; m < audio::kMelBins; ++m) {
      const float* row = a.features.data() + static_cast<std::size_t>(m) * a.frames;
      std::copy_n(row, kept, v.features);
      std::fill(v.features + kept, v.features + F, row[a.frames - 1]);
      v.features += F;
    }
    const auto valid = std::min(static_cast<std::size_t>(a.valid_frames), F);
    std::fill_n(v.feature_mask, valid, 1);
    std::fill(v.feature_mask + valid, v.feature_mask + F, 0);
    v.feature_mask += F;
  }
}

// An hf row's tail sequence, seq_idx and flash attention's max_length_q/k.
void finish_hf_row(Batch& b, const Views& v, const Extent& e) {
  if (e.segments > e.n) v.cu[e.segments] = v.cu2[e.segments] = static_cast<std::int32_t>(e.T);
  for (std::int64_t k = 0; v.seq_idx && k < e.segments; ++k) {
    std::fill(v.seq_idx + v.cu[k], v.seq_idx + v.cu[k + 1], static_cast<std::int32_t>(k));
  }
  std::int64_t max_length = 0;
  for (std::int64_t k = 0; k < e.segments; ++k) max_length = std::max<std::int64_t>(max_length, v.cu[k + 1] - v.cu[k]);
  b.scalars = {{"max_length_q", max_length}, {"max_length_k", max_length}};
}

}  // namespace

void write_pixels(const PixelJob& job, const vision::ImageTransform& images, const vision::VideoProcessor& videos) {
  if (job.image != nullptr) {
    images.write(*job.image, job.dest);
  } else {
    videos.write(*job.video, job.dest);
  }
}

AssembledBatch assemble_batch(const std::vector<std::unique_ptr<Work>>& samples, const BatchLayout& layout,
                              const vision::ImageTransform& images, const vision::VideoProcessor& videos,
                              core::BufferPool& pool) {
  const bool thd = layout.packed && layout.format == PackedFormat::kThd;
  const Extent e = measure(samples, layout);
  AssembledBatch out;
  Batch& b = out.batch;
  for (const auto& w : samples) b.sample_ids.push_back(w->id);
  Views v = place_tensors(b, e, layout, images, videos, pool);
  if (v.cu) v.cu[0] = v.cu2[0] = 0;
  std::size_t cursor = 0;  // packed: where the next sample starts
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Work& w = *samples[i];
    if (!layout.packed) {
      write_padded_row(v, layout, w, i, static_cast<std::size_t>(e.T));
    } else if (thd) {
      cursor = write_thd_sequence(v, layout, w, i, cursor);
    } else {
      cursor = write_hf_sequence(v, layout, w, i, i + 1 == samples.size(), cursor, e.T);
    }
    write_media(v, e, w, images, videos, out.pixels);
  }
  if (layout.packed && !thd) {
    finish_hf_row(b, v, e);
  } else if (thd) {
    b.scalars = {{"max_seqlen", static_cast<std::int64_t>(e.longest)},
                 {"max_seqlen_padded", static_cast<std::int64_t>(e.longest_span)}};
  }
  return out;
}

}  // namespace mmfeed::pipeline
