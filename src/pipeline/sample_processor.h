// The sample processor: one manifest line to a sample ready for a batch, as pure steps over a
// `Work` (pipeline/sample.h). prepare() parses the line and resolves its image, video and audio
// URIs; process() probes the fetched images' headers and the videos' containers for their grids
// (a video's frames planned by the model's recipe, vision/video_processor.h), loads the audio
// clips and computes their features (the Omni models: their audio tokens come from them), renders
// and tokenizes the conversation with them, and (unless deferred for packing) decode_media()
// decodes and resizes the images and the videos' planned frames.
// Failures are recorded in the sample (`Work::error`, naming it, its stage and the reason).
//
// Thread safety: const and stateless apart from metrics and the trace, so any number of threads
// call it at once, each on a sample it owns. The tokenizer loads on a thread of its own while
// the first images are fetched; the first process() waits for it.
//
// Example:
//   SampleProcessor proc(settings, manifests, load_tokenizer(config.tokenizer), &budget, metrics, &trace);
//   auto w = proc.prepare(/*epoch=*/0, /*seq=*/0, order[0]);
//   ... fetch w->media into w->bytes ...
//   proc.process(*w, /*defer_images=*/false);
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/trace.h"
#include "dataset/manifest.h"
#include "mmfeed/error.h"
#include "pipeline/config.h"
#include "pipeline/memory_budget.h"
#include "pipeline/sample.h"
#include "text/tokenizer.h"

namespace mmfeed::pipeline {

struct LoadedTokenizer {
  std::unique_ptr<text::Tokenizer> tok;
  std::int32_t pad_id = 0;
  // -1: the tokenizer has none. Qwen2.5-Omni's are named <|IMAGE|>, <|VIDEO|> and <|AUDIO|>.
  std::int32_t image_pad_id = -1, video_pad_id = -1, audio_pad_id = -1;
};
using TokenizerFuture = std::shared_future<Result<std::shared_ptr<const LoadedTokenizer>>>;

// Starts loading the tokenizer at `path` (about 0.1 s for a 150k vocabulary) on a thread of its
// own; throws std::system_error when the thread cannot start.
TokenizerFuture load_tokenizer(const std::string& path);

class SampleProcessor {
 public:
  // `budget`: where the bytes a sample holds are counted (null: not counted, the serial mode).
  // `manifests`, `budget`, `metrics` and `trace` must outlive the processor.
  SampleProcessor(const Settings& settings, const dataset::Manifests& manifests, TokenizerFuture tokenizer,
                  MemoryBudget* budget, core::MetricsRegistry& metrics, core::TraceWriter* trace);

  // The sample at `line_index` of the manifests, `seq`-th of the rank's order in `epoch`: its
  // conversation parsed, its image and video URIs resolved, one empty byte slot for each.
  std::unique_ptr<Work> prepare(int epoch, std::uint64_t seq, std::uint64_t line_index) const;
  // The samples at `line_indexes` are to be prepared soon: a remote manifest's text is fetched
  // ahead (where reads_text_remotely()).
  void prefetch_text(std::span<const std::uint64_t> line_indexes) const { manifests_.prefetch(line_indexes); }
  bool reads_text_remotely() const { return manifests_.reads_text_remotely(); }

  // The grids from the images' headers and the videos' plans, then the text (rendered and
  // tokenized with them), then, unless `defer_images` (packing: the batcher plans rows from the
  // token counts first and has the media decoded row by row), the media decoded and resized.
  void process(Work& w, bool defer_images) const;

  // Decodes and resizes the sample's (kept) images and videos; normalized and patchified later,
  // straight into the batch. `account`: the fetched bytes count against the budget until now
  // (not when the batcher, which has released the sample, calls it). False on failure (in
  // `w.error`).
  bool decode_media(Work& w, bool account) const;

  // The tokenizer and its padding and vision pad ids; waits for it (loaded once any sample is
  // processed).
  const LoadedTokenizer& tokenizer() const { return **tokenizer_.get(); }

  const ModelRow& model() const { return model_; }
  const vision::ImageTransform& images() const { return vision_; }
  const vision::VideoProcessor& videos() const { return videos_; }
  // The model's audio profile (the Omni models), or none.
  const std::optional<audio::AudioModel>& audio_model() const { return audio_; }

 private:
  void hold(Work& w, std::int64_t delta) const;
  // The steps of process(), each false (with w.error set) when the sample fails it: the images'
  // grids from their headers and the videos' plans; the pixel rows they make against the byte
  // budget; the text encoded with them (waiting for the tokenizer); a sample that trains nothing
  // refused; the media truncation cut released; a sample too long for a packed row refused.
  // The images' sizes against the index's facts, when the sample's manifest has one: each one
  // counted in index.facts_checked, each that differs (the image replaced since it was indexed)
  // in index.facts_disagreed; never trusted over the header.
  // The media sources of the sample's references (a shard sample known by its range gives what
  // it read of it) into w.media; false, with w.error set, when one is refused.
  bool resolve_refs(Work& w, const text::Conversation& c, const dataset::ManifestLine& line,
                    const dataset::RangeSample* range) const;
  void check_facts(const Work& w) const;
  // The sample's tokens against its index's text tokens plus its images' (a sample of images
  // alone, not truncated, whose index counted them with this run's tokenizer and template):
  // counted in index.tokens_checked, each that differs in index.tokens_disagreed.
  void check_tokens(const Work& w, const text::SftSample& s) const;
  bool plan_media(Work& w) const;
  bool check_pixel_budget(Work& w) const;
  Result<text::SftSample> encode_text(const Work& w) const;
  bool check_trainable(Work& w, const text::SftSample& s) const;
  void drop_truncated_media(Work& w, const text::SftSample& s) const;
  bool check_token_budget(Work& w, const text::SftSample& s) const;
  // Decodes the sample's Parquet images from their fetched pages into one block of `w.bytes` (false, with
  // w.error set, when one does not decode); nothing for a sample without them.
  bool extract_cells(Work& w) const;
  // Frees the fetched bytes of media `i`, counted against the budget when `account`.
  void release_bytes(Work& w, std::size_t i, bool account) const;
  // Loads the sample's audio clips and (use_audio_in_video) its videos' soundtracks, in order of
  // appearance, and computes their features, releasing the clips' bytes (a video's stay for its
  // frames); false, with w.error set, when one fails. A video without audio has no soundtrack.
  bool load_audio_clips(Work& w) const;

  const SampleOptions options_;
  const dataset::Manifests& manifests_;
  const TokenizerFuture tokenizer_;
  // The image processor and chat template of the sample's source: the loader's, or its own.
  const vision::ImageTransform& images_of(const Work& w) const {
    return w.source < source_images_.size() ? *source_images_[w.source] : vision_;
  }
  text::ChatTemplate template_of(const Work& w) const {
    return w.source < source_templates_.size() ? source_templates_[w.source] : template_;
  }

  const vision::ImageTransform vision_;
  const ModelRow& model_;
  const vision::VideoProcessor videos_;
  const text::ChatTemplate template_;
  std::vector<std::unique_ptr<const vision::ImageTransform>> source_images_;  // per manifest, when given
  const std::vector<text::ChatTemplate> source_templates_;
  const text::SftOptions sft_;
  const std::optional<audio::AudioModel> audio_;
  MemoryBudget* const budget_;
  core::TraceWriter* const trace_;
  core::Histogram& process_ns_;
  core::Histogram& decode_ns_;
  // The images whose size the index gave (dataset/index.h), and those whose header says otherwise.
  core::Counter& facts_checked_;
  core::Counter& facts_disagreed_;
  core::Gauge& index_blocks_;               // the indexes' blocks this process checked (read) so far
  core::Gauge& text_requests_;              // GETs of remote manifests' sample text (opened from an index)
  core::Gauge& text_bytes_;                 // the bytes they brought
  const std::vector<bool> trusted_tokens_;  // per manifest (balance.h, trusted_text_tokens)
  core::Counter& tokens_checked_;
  core::Counter& tokens_disagreed_;
};

}  // namespace mmfeed::pipeline
