// The batch assembler: processed samples in, one batch out, every tensor in one pooled buffer.
// Padded, B rows of the longest sample's length L, with an attention mask; packed, the samples end
// to end in one row of T tokens, laid out as PackedFormat says (loader.h): transformers' (the
// row's tail a sequence of its own) or Megatron's THD (each sample's own padding). Lengths are
// rounded up to pad_to_multiple_of with padding (pad id, label -100, mask 0, position 0; an hf
// row's tail: positions counting on from 0, so that it reads as a sequence apart). Every batch
// has mm_token_type_ids (1 at image pads, 2 at video pads, 3 at audio pads, as HF's processors
// return it). No
// label crosses a packed sample's boundary: hf rows set each sample's first label to -100, thd
// rows shift labels within each sample (Megatron's next-token labels).
// Assembly plans the buffer and writes the text tensors
// (O(tokens)); each image's and each video's pixel rows are a PixelJob: normalized and
// patchified straight from the sample's resized image or frames into its slot of the buffer, so
// they are written once, by any thread, in parallel. A batch that holds an image has
// pixel_values and image_grid_thw (none without: the processors return none, and the models'
// vision towers fail on empty ones). A batch that holds a video also has
// pixel_values_videos, video_grid_thw and, for Qwen2.5-VL, second_per_grid_ts (as the model's
// processor returns them only when it is given videos; an Omni model's processor names the last
// video_second_per_grid). A batch that holds audio clips (the Omni models) has input_features
// [clips, 128, frames] float32 and feature_attention_mask [clips, frames] int32, the clips in
// sample order (as the processor returns them). Pure apart from the pool: the same samples and
// layout give the same bytes.
//
// Example:
//   AssembledBatch a = assemble_batch(samples, {.packed = false, .pad_id = 151643}, images, videos, pool);
//   for (const PixelJob& job : a.pixels) write_pixels(job, images, videos);   // or spread over threads
//   Batch b = std::move(a.batch);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/buffer_pool.h"
#include "mmfeed/loader.h"
#include "pipeline/sample.h"
#include "vision/image_transform.h"
#include "vision/video_processor.h"

namespace mmfeed::pipeline {

struct BatchLayout {
  bool packed = false;  // one row of the samples end to end
  PackedFormat format = PackedFormat::kHf;
  std::size_t pad_to_multiple_of = 0;  // > 1: lengths (thd: each sample's) rounded up to a multiple
  bool mrope = false;                  // position_ids from the samples' mrope ids
  std::int32_t pad_id = 0;
  std::int64_t image_pad_id = -1, video_pad_id = -1, audio_pad_id = -1;  // the tokens mm_token_type_ids marks
  // Videos carry second_per_grid_ts (the model's positions step by their seconds).
  bool second_per_grid_ts = false;
  // An Omni model's batch: its videos' seconds per group as its processor names them
  // (video_second_per_grid), its audio clips padded together as `audio_padding` says.
  bool omni = false;
  AudioPadding audio_padding = AudioPadding::kModel;
  // A model with linear-attention layers (Qwen3.5's Gated DeltaNet): an hf row also carries
  // seq_idx [1, T] int32, each token's sequence (the tail's its own), which the short
  // convolution's kernel reads to keep the samples apart (cu_seq_lens_q does not reach it).
  bool seq_idx = false;
};

// One image's rows of pixel_values, or one video's of pixel_values_videos: where they come from
// (owned by its sample, which must outlive the job) and where they go in the batch buffer.
struct PixelJob {
  const vision::Resized* image = nullptr;
  const vision::ResizedVideo* video = nullptr;  // when `image` is null
  std::byte* dest = nullptr;                    // rows of the processors' output type
};

// A batch whose pixel_values are still to be written, by the jobs.
struct AssembledBatch {
  Batch batch;
  std::vector<PixelJob> pixels;
};

// The batch of `samples` (epoch and index left for the caller), every tensor written but
// pixel_values, which `pixels` writes. Its buffer comes from `pool`, whose blocks are uniform
// (BatchMemory): any cached buffer can serve the next batch (a fresh one costs a page fault and a
// zero fill per page, about as much as writing the pixels), and the tail a smaller batch leaves
// is never touched.
AssembledBatch assemble_batch(const std::vector<std::unique_ptr<Work>>& samples, const BatchLayout& layout,
                              const vision::ImageTransform& images, const vision::VideoProcessor& videos,
                              core::BufferPool& pool);

// Writes one image's or video's rows (normalize + patchify). Thread-safe: jobs of a batch write
// disjoint rows.
void write_pixels(const PixelJob& job, const vision::ImageTransform& images, const vision::VideoProcessor& videos);

}  // namespace mmfeed::pipeline
