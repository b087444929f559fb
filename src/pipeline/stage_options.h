// What each stage reads of the options, built once from LoaderConfig by check_config (config.h)
// into Settings: a stage receives its own few, never LoaderConfig. A new option a stage reads is
// one field here and one line in config.cc's stage_options().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mmfeed/choices.h"
#include "mmfeed/loader.h"

namespace mmfeed::pipeline {

// The run's order (order.h's run_order; the walk, walk.h).
struct OrderOptions {
  std::uint64_t seed = 0;
  bool shuffle = true;
  int rank = 0;
  int world_size = 1;
  ShardRemainder remainder = ShardRemainder::kPad;
  int epochs = 1;
  std::uint64_t end_position = 0;  // > 0: the run ends there in its last epoch
  // Balancing (balance.h): each step's world_size x balance_batches x balance_batch samples split
  // across the ranks by cost (Population::cost); balance_batch 0: as drawn.
  std::size_t balance_batch = 0;
  std::size_t balance_batches = 1;  // a rank's batches a step (gradient accumulation)
};

// How samples are packed into rows: what the sample processor checks a sample's fit against and
// the batch builder lays rows out by.
struct PackingOptions {
  std::size_t token_budget = 0;  // > 0: packed rows of this many tokens
  PackedFormat format = PackedFormat::kHf;
  std::size_t pad_to_multiple_of = 0;
};

// A packed sample's length in its row: PackedFormat::kThd pads each sample to a multiple of
// pad_to_multiple_of; transformers' layout packs the samples as they are.
inline std::size_t packed_span(std::size_t tokens, PackedFormat format, std::size_t pad_to_multiple_of) {
  const std::size_t m = format == PackedFormat::kThd ? std::max<std::size_t>(pad_to_multiple_of, 1) : 1;
  return (tokens + m - 1) / m * m;
}

// The sample processor's (sample_processor.h): what a sample may name and hold, and the packing
// it must fit.
struct SampleOptions {
  std::string model;  // as named, for messages
  std::size_t max_images_per_sample = 256;
  std::uint64_t max_object_bytes = 0;
  std::uint64_t max_buffered_bytes = 0;
  std::size_t max_manifest_bytes = 0;  // a shard sample's .json read by its range (dataset::Manifest::ranges)
  std::vector<std::string> media_root;
  bool allow_local_media_from_remote_manifest = false;
  bool use_audio_in_video = false;
  PackingOptions packing;
};

// The batch builder's (batch_builder.h): the group it gathers and the batch's layout.
struct BatchOptions {
  std::size_t group_positions = 8;  // a padded batch's positions, or a packing window's
  PackingOptions packing;
  bool mrope = true;
  AudioPadding audio_padding = AudioPadding::kModel;
  int workers = 1;  // the pool's tasks writing a batch's pixels
};

// The drivers' (driver.h, and the concurrent driver's stages) and the memory budget's window.
struct DriveOptions {
  OrderOptions order;
  bool packed = false;  // token_budget > 0: media decoded row by row when the batch is built
  bool ordered = true;
  int workers = 1;  // resolved: never 0
  std::size_t batch_size = 8;
  std::size_t prefetch_batches = 0;  // 0: automatic
  std::size_t max_buffered_bytes = 0;
};

}  // namespace mmfeed::pipeline
