// One sample on its way through the stages: parsed from its manifest line (prepare), its images
// and videos fetched, their headers probed, text encoded and media resized (process, decode),
// then laid into a batch (assembler.h). Owned by one stage at a time: the reader, the collector, a CPU worker,
// the batcher — handed on with its unique_ptr, so no two threads touch it at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer_pool.h"
#include "dataset/manifest.h"
#include "mmfeed/loader.h"
#include "pipeline/media_bytes.h"
#include "storage/uri.h"
#include "text/conversation.h"
#include "vision/image_transform.h"
#include "vision/video_processor.h"

namespace mmfeed::pipeline {

// The one key of the loader's maps: a sample (epoch, position in the rank's order) or a batch
// (epoch, batch number), ordered by epoch first. 2^40 positions an epoch, 2^24 epochs.
inline std::uint64_t order_key(int epoch, std::uint64_t n) { return (static_cast<std::uint64_t>(epoch) << 40) | n; }

// One audio clip of a sample (the Omni models), loaded and transformed by process(): its log-mel
// features as the model's processor computes them for the clip padded to the model's fixed
// length, kept only up to the first frame of silence past the clip (every later frame equals
// it), and what the text needs of it.
struct AudioClip {
  std::vector<float> features;  // 128 rows of `frames` floats
  std::size_t frames = 0;
  std::int64_t valid_frames = 0;  // feature_attention_mask's sum
  std::int64_t tokens = 0;        // the audio tokens the model's encoder makes of it
  // Whose it is: audio item `index`, or video `index`'s soundtrack (use_audio_in_video).
  bool soundtrack = false;
  std::size_t index = 0;
};

struct Work {
  std::uint64_t seq = 0;  // position in this rank's order for the epoch
  int epoch = 0;
  std::uint32_t source = 0;  // the manifest it came from
  std::uint64_t line = 0;    // its sample (Manifests::lines)
  std::string id;
  text::Conversation conversation;
  // The images' URIs, then the videos', then the audio clips': fetched into `bytes`, index for index.
  std::vector<dataset::MediaSource> media;  // objects, or members of tar shards (byte ranges)
  std::size_t image_count = 0;
  MediaBytes bytes;  // what is fetched for them, and where each medium's bytes lie (media_bytes.h)
  std::vector<vision::VideoRequest> video_requests;  // each video item's keys
  std::vector<text::AudioKeys> audio_requests;       // each audio item's keys (its crop)
  bool soundtracks = false;                          // its videos bring their soundtracks (use_audio_in_video)
  std::vector<vision::ImageInfo> infos;              // the images' headers, probed before the text is encoded
  std::size_t arrived = 0;
  std::optional<SampleError> error;
  // Results.
  std::vector<std::int32_t> input_ids, labels, mrope;  // mrope: 3 x L when asked
  std::int64_t held = 0;                               // bytes this sample counts against max_buffered_bytes
  std::vector<vision::Grid> grids;                     // the images' (kept after truncation)
  std::vector<vision::VideoPlan> video_plans;          // the videos' (kept after truncation)
  std::vector<vision::Resized> resized;                // patchified into the batch by assemble()
  std::vector<vision::ResizedVideo> resized_videos;
  // The audio items' clips and the videos' soundtracks, in order of appearance (the model's
  // input_features order); kept after truncation.
  std::vector<AudioClip> audio;

  const dataset::MediaSource& video_uri(std::size_t v) const { return media[image_count + v]; }
  std::size_t audio_index(std::size_t a) const { return image_count + video_requests.size() + a; }
  // What is fetched for it: bytes' blocks.
  std::size_t fetches() const { return bytes.blocks(); }
  storage::FetchRequest fetch(std::size_t i, std::uint64_t tag) const { return bytes.fetch(i, tag); }
  // Fetch i's result: its bytes kept, or the sample's error (its first) recorded. Returns the
  // bytes it now holds more.
  std::int64_t receive(std::size_t i, Result<core::Buffer> data) {
    if (!data.ok()) {
      if (!error) error = SampleError{id, "fetch", data.error().to_string(), data.error().code()};
      return 0;
    }
    return bytes.fill(i, std::move(data).value());
  }
};

}  // namespace mmfeed::pipeline
