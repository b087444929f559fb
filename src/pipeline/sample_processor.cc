// One stage in one file of about 600 lines, on purpose: a sample's steps (its text read, its media
// resolved and fetched, grids, the conversation encoded, the media decoded) share the Work they fill.
#include "pipeline/sample_processor.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <span>
#include <utility>

#include "audio/features.h"
#include "core/clock.h"
#include "dataset/parquet.h"
#include "mmfeed/audio.h"
#include "pipeline/balance.h"
#include "text/chat_encode.h"

namespace mmfeed::pipeline {

TokenizerFuture load_tokenizer(const std::string& path) {
  return std::async(std::launch::async,
                    [path]() -> Result<std::shared_ptr<const LoadedTokenizer>> {
                      MMFEED_ASSIGN_OR_RETURN(auto tok, text::Tokenizer::from_file(path));
                      auto loaded = std::make_shared<LoadedTokenizer>();
                      loaded->pad_id = tok->token_to_id("<|endoftext|>").value_or(0);
                      const auto id = [&](std::string_view name, std::string_view omni_name) {
                        return tok->token_to_id(name).value_or(tok->token_to_id(omni_name).value_or(-1));
                      };
                      loaded->image_pad_id = id("<|image_pad|>", "<|IMAGE|>");
                      loaded->video_pad_id = id("<|video_pad|>", "<|VIDEO|>");
                      loaded->audio_pad_id = id("<|audio_pad|>", "<|AUDIO|>");
                      loaded->tok = std::move(tok);
                      return std::shared_ptr<const LoadedTokenizer>(std::move(loaded));
                    })
      .share();
}

namespace {

std::span<const std::uint8_t> bytes_of(const Work& w, std::size_t i) {
  const std::span<const std::byte> b = w.bytes.medium(i);
  return {reinterpret_cast<const std::uint8_t*>(b.data()), b.size()};
}

std::span<const std::byte> video_bytes(const Work& w, std::size_t v) { return w.bytes.medium(w.image_count + v); }

// The sample's fetches: its media one by one, or, a shard's media close together, the span from
// the first to the last when what lies between them (headers, the .json, small members) is small
// beside them.
void plan_fetches(Work& w, std::uint64_t max_object_bytes) {
  constexpr std::uint64_t kGapPerMedium = 64 << 10;
  const auto one_span = [&] {
    if (w.media.size() < 2 || !w.media[0].range) return false;
    std::uint64_t lo = UINT64_MAX, hi = 0, total = 0;
    for (const dataset::MediaSource& m : w.media) {
      if (!m.range || m.uri != w.media[0].uri) return false;
      lo = std::min(lo, m.range->offset);
      hi = std::max(hi, m.range->offset + m.range->length);
      total += m.range->length;
    }
    if (hi - lo > max_object_bytes || hi - lo > total + kGapPerMedium * w.media.size()) return false;
    std::vector<storage::ByteRange> places;
    for (const dataset::MediaSource& m : w.media) places.push_back({m.range->offset - lo, m.range->length});
    w.bytes.plan_span(dataset::MediaSource{w.media[0].uri, storage::ByteRange{lo, hi - lo}, "", nullptr},
                      std::move(places));
    return true;
  };
  if (!one_span()) w.bytes.plan_objects(w.media);
}

// A video's plan, its frame count checked against the byte budget before its frames are listed
// (an index, a padded copy and a timestamp each: nframes 1e9 committed 19 GB before the budget
// refused the rows they make).
Result<vision::VideoPlan> plan_within(const vision::VideoProcessor& videos, std::span<const std::byte> bytes,
                                      const vision::VideoRequest& request, std::uint64_t max_buffered_bytes) {
  const vision::VideoLimits limits;
  MMFEED_ASSIGN_OR_RETURN(const vision::VideoInfo info, vision::probe_video(bytes, limits));
  MMFEED_ASSIGN_OR_RETURN(const std::int64_t frames,
                          vision::planned_frame_count(videos.profile(), info, request, limits));
  const std::uint64_t least = vision::min_video_rows(videos.profile(), frames) * videos.row_bytes();
  if (least > max_buffered_bytes) {
    return Error(ErrorCode::kResourceExhausted,
                 "video: " + std::to_string(frames) + " frames sampled need at least " + std::to_string(least) +
                     " bytes of pixel rows (at the smallest frame size), more than max_buffered_bytes (" +
                     std::to_string(max_buffered_bytes) + "); sample fewer frames or raise the budget");
  }
  return vision::plan_video(videos.profile(), info, request, limits);
}

}  // namespace

SampleProcessor::SampleProcessor(const Settings& settings, const dataset::Manifests& manifests,
                                 TokenizerFuture tokenizer, MemoryBudget* budget, core::MetricsRegistry& metrics,
                                 core::TraceWriter* trace)
    : options_(settings.sample),
      manifests_(manifests),
      tokenizer_(std::move(tokenizer)),
      vision_(settings.vision),
      model_(*settings.model),
      videos_(settings.video, settings.vision.output, settings.vision.kernel),
      template_(settings.chat_template),
      source_templates_(settings.source_templates),
      sft_(settings.sft),
      audio_(settings.audio),
      budget_(budget),
      trace_(trace),
      process_ns_(metrics.histogram("loader.process_sample_ns")),
      decode_ns_(metrics.histogram("loader.decode_media_ns")),
      facts_checked_(metrics.counter("index.facts_checked")),
      facts_disagreed_(metrics.counter("index.facts_disagreed")),
      index_blocks_(metrics.gauge("index.blocks_checked")),
      text_requests_(metrics.gauge("manifest.text_requests")),
      text_bytes_(metrics.gauge("manifest.text_bytes")),
      trusted_tokens_(trusted_text_tokens(settings, manifests)),
      tokens_checked_(metrics.counter("index.tokens_checked")),
      tokens_disagreed_(metrics.counter("index.tokens_disagreed")) {
  for (const vision::ProcessorConfig& c : settings.source_vision) {
    source_images_.push_back(std::make_unique<const vision::ImageTransform>(c));
  }
}

void SampleProcessor::hold(Work& w, std::int64_t delta) const {
  if (budget_ != nullptr) budget_->hold(w, delta);
}

std::unique_ptr<Work> SampleProcessor::prepare(int epoch, std::uint64_t seq, std::uint64_t line_index) const {
  auto w = std::make_unique<Work>();
  w->epoch = epoch;
  w->seq = seq;
  w->line = line_index;
  const Result<dataset::ManifestLine> found = manifests_.line(line_index);
  if (!found.ok()) {  // its index's block does not check out
    w->source = manifests_.manifest_of(line_index);
    const dataset::Manifest& m = manifests_.files[w->source];
    w->id = m.name + " sample " + std::to_string(line_index - m.first_line);
    w->error = SampleError{w->id, "manifest", found.error().to_string(), found.error().code()};
    return w;
  }
  const dataset::ManifestLine& line = *found;
  w->source = line.manifest;
  w->id = manifests_.where(line);
  if (manifests_.files[line.manifest].index != nullptr) {
    std::uint64_t blocks = 0;
    for (const dataset::Manifest& m : manifests_.files) blocks += m.index ? m.index->blocks_checked() : 0;
    index_blocks_.set(static_cast<std::int64_t>(blocks));
  }
  const dataset::Manifest& m = manifests_.files[line.manifest];
  std::optional<dataset::RangeSample> range;  // a shard sample known by its range: its headers read now
  if (m.ranges) {
    auto read = manifests_.read_range(line, options_.max_manifest_bytes);
    if (!read.ok()) {
      w->error = SampleError{w->id, "manifest", read.error().to_string(), read.error().code()};
      return w;
    }
    range = std::move(read).value();
    w->id = m.shards[m.ranges->shard_of(line.number)].name + "[" + range->key + "]";  // as where() names it scanned
  } else if (!m.shards.empty() && m.samples[line.number].error) {
    const Error& e = *m.samples[line.number].error;
    w->error = SampleError{w->id, "manifest", e.to_string(), e.code()};
    return w;
  }
  std::string buffer;  // the sample's text, when its manifest was opened from an index
  const Result<std::string_view> text =
      range ? Result<std::string_view>(std::string_view(range->json)) : manifests_.text(line, buffer);
  if ((m.indexed && m.indexed->remote()) || (m.ranges && m.ranges->remote)) {
    const dataset::IndexedText::Reads reads = manifests_.remote_text_reads();
    text_requests_.set(static_cast<std::int64_t>(reads.requests));
    text_bytes_.set(static_cast<std::int64_t>(reads.bytes));
  }
  if (!text.ok()) {
    w->error = SampleError{w->id, "manifest", text.error().to_string(), text.error().code()};
    return w;
  }
  auto c = text::parse_conversation(*text);
  if (!c.ok()) {
    std::string reason = c.error().to_string();
    if (auto id = text::sample_id_of(*text)) {  // keyed by its id, the line named in the reason
      reason += " (" + w->id + ")";
      w->id = std::move(*id);
    }
    w->error = SampleError{w->id, "manifest", std::move(reason), c.error().code()};
    return w;
  }
  if (!c->id.empty()) w->id = c->id;
  if (const std::size_t audio = c->count(text::ContentItem::Type::kAudio); audio > 0 && !audio_) {
    w->error = SampleError{w->id, "manifest",
                           "sample holds " + std::to_string(audio) + " audio items, which model \"" + options_.model +
                               "\" takes none of (models with audio: " + model_names(true) + ")",
                           ErrorCode::kUnsupported};
    return w;
  }
  const std::size_t images = c->count(text::ContentItem::Type::kImage);
  const std::size_t videos = c->count(text::ContentItem::Type::kVideo);
  w->soundtracks = videos > 0 && c->use_audio_in_video.value_or(options_.use_audio_in_video);
  if (w->soundtracks && !audio_) {
    w->error = SampleError{w->id, "manifest",
                           "sample asks for its videos' soundtracks (use_audio_in_video), which model \"" +
                               options_.model + "\" takes none of (models with audio: " + model_names(true) + ")",
                           ErrorCode::kUnsupported};
    return w;
  }
  if (images + videos > options_.max_images_per_sample) {
    const std::string named = videos == 0
                                  ? std::to_string(images) + " images"
                                  : std::to_string(images) + " images and " + std::to_string(videos) + " videos";
    w->error = SampleError{w->id, "manifest",
                           "sample names " + named + ", more than max_images_per_sample (" +
                               std::to_string(options_.max_images_per_sample) + ")",
                           ErrorCode::kResourceExhausted};
    return w;
  }
  if (!resolve_refs(*w, *c, line, range ? &*range : nullptr)) return w;
  w->image_count = images;
  for (const text::VideoKeys& k : c->video_keys()) {
    vision::VideoRequest& r = w->video_requests.emplace_back();
    r.sampling = {k.nframes, k.fps, k.min_frames, k.max_frames, k.video_start, k.video_end};
    r.min_pixels = k.min_pixels;
    r.max_pixels = k.max_pixels;
    r.total_pixels = k.total_pixels;
  }
  w->audio_requests = c->audio_keys();
  w->conversation = std::move(c).value();
  plan_fetches(*w, options_.max_object_bytes);
  return w;
}

bool SampleProcessor::resolve_refs(Work& w, const text::Conversation& c, const dataset::ManifestLine& line,
                                   const dataset::RangeSample* range) const {
  std::vector<std::string> refs = c.media(text::ContentItem::Type::kImage);
  for (std::string& ref : c.media(text::ContentItem::Type::kVideo)) refs.push_back(std::move(ref));
  for (std::string& ref : c.media(text::ContentItem::Type::kAudio)) refs.push_back(std::move(ref));
  for (const std::string& ref : refs) {
    auto parsed =
        dataset::resolve_media(ref, manifests_, line, dataset::media_root_of(options_.media_root, line.manifest),
                               options_.allow_local_media_from_remote_manifest, range);
    if (!parsed.ok()) {
      w.error = SampleError{w.id, "manifest", parsed.error().to_string(), parsed.error().code()};
      return false;
    }
    if (parsed->range && parsed->range->length > options_.max_object_bytes) {  // refused before it is fetched
      w.error = SampleError{w.id, "fetch",
                            parsed->to_string() + (parsed->cell ? ": its page" : ": member") + " of " +
                                std::to_string(parsed->range->length) + " bytes exceeds max_object_bytes (" +
                                std::to_string(options_.max_object_bytes) + ")",
                            ErrorCode::kResourceExhausted};
      return false;
    }
    w.media.push_back(std::move(parsed).value());
  }
  return true;
}

bool SampleProcessor::extract_cells(Work& w) const {
  if (std::none_of(w.media.begin(), w.media.end(), [](const dataset::MediaSource& m) { return m.cell != nullptr; })) {
    return true;
  }
  std::vector<std::byte> cells;
  std::vector<storage::ByteRange> places;
  for (std::size_t i = 0; i < w.media.size(); ++i) {
    const std::span<const std::byte> fetched = w.bytes.medium(i);
    if (!w.media[i].cell) {
      places.push_back({cells.size(), fetched.size()});
      cells.insert(cells.end(), fetched.begin(), fetched.end());
      continue;
    }
    // Its pages decompressed within what one fetched object may be (as the fetch itself).
    auto place = dataset::parquet_value(*w.media[i].cell, fetched,
                                        std::min(options_.max_object_bytes, options_.max_buffered_bytes), cells);
    if (!place.ok()) {
      const char* stage = i < w.image_count ? "image" : i < w.audio_index(0) ? "video" : "audio";
      w.error = SampleError{w.id, stage, place.error().with_context(w.media[i].to_string()).to_string(),
                            place.error().code()};
      return false;
    }
    places.push_back(*place);
  }
  hold(w, w.bytes.replace(std::move(cells), std::move(places)));
  return true;
}

void SampleProcessor::release_bytes(Work& w, std::size_t i, bool account) const {
  const std::int64_t freed = w.bytes.release(i);
  if (account) hold(w, -freed);
}

void SampleProcessor::process(Work& w, bool defer_images) const {
  core::TraceSpan span(trace_, "process sample", "cpu", w.id);
  const core::Stopwatch sw;
  if (!extract_cells(w) || !plan_media(w) || !load_audio_clips(w) || !check_pixel_budget(w)) return;
  // While the tokenizer is still loading (the first samples of a run), the media are decoded
  // first: that work needs no tokenizer, and a conversation that turns out too long only wastes it.
  const bool decoded_first = !defer_images && tokenizer_.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  if (decoded_first && !decode_media(w, /*account=*/true)) return;
  auto s = encode_text(w);
  if (!s.ok()) {
    w.error = SampleError{w.id, "text", s.error().to_string(), s.error().code()};
    return;
  }
  check_tokens(w, *s);
  if (!check_trainable(w, *s)) return;
  drop_truncated_media(w, *s);
  if (!check_token_budget(w, *s)) return;
  w.input_ids = std::move(s->input_ids);
  w.labels = std::move(s->labels);
  w.mrope = std::move(s->position_ids);
  if (!defer_images && !decoded_first && !decode_media(w, /*account=*/true)) return;
  std::size_t media_bytes = 0;
  for (const vision::Resized& r : w.resized) media_bytes += r.image.pixels.size();
  for (const vision::ResizedVideo& r : w.resized_videos) media_bytes += r.frames.size();
  hold(w, static_cast<std::int64_t>(media_bytes + (w.input_ids.size() * 2 + w.mrope.size()) * sizeof(std::int32_t)));
  process_ns_.record(static_cast<std::uint64_t>(sw.elapsed_ns()));
}

void SampleProcessor::check_facts(const Work& w) const {
  const dataset::Manifest& m = manifests_.files[w.source];
  if (m.index == nullptr) return;
  const Result<IndexRecord> found = m.index->record(w.line - m.first_line);  // checked by prepare()
  if (!found.ok()) return;
  const IndexRecord& r = *found;
  for (std::size_t i = 0; i < std::min<std::size_t>(r.images, w.infos.size()); ++i) {
    const MediaFacts f = m.index->media(r.first_media + i);
    if (f.known != MediaFacts::Known::kRead) continue;
    facts_checked_.add();
    const vision::ImageInfo& info = w.infos[i];
    if (f.width != static_cast<std::uint32_t>(info.upright_width()) ||
        f.height != static_cast<std::uint32_t>(info.upright_height())) {
      facts_disagreed_.add();
    }
  }
}

void SampleProcessor::check_tokens(const Work& w, const text::SftSample& s) const {
  if (w.source >= trusted_tokens_.size() || !trusted_tokens_[w.source] || s.truncated || !w.video_plans.empty() ||
      !w.audio.empty()) {
    return;
  }
  const dataset::Manifest& m = manifests_.files[w.source];
  const Result<IndexRecord> found = m.index->record(w.line - m.first_line);  // checked by prepare()
  if (!found.ok() || found->text_tokens == 0) return;
  const auto merge = static_cast<std::uint64_t>(sft_.merge_size) * sft_.merge_size;
  std::uint64_t expected = found->text_tokens;
  for (const vision::Grid& g : w.grids) expected += static_cast<std::uint64_t>(g.t) * g.h * g.w / merge;
  tokens_checked_.add();
  if (s.input_ids.size() != expected) tokens_disagreed_.add();
}

bool SampleProcessor::plan_media(Work& w) const {
  for (std::size_t i = 0; i < w.image_count; ++i) {
    auto info = vision::probe(bytes_of(w, i));
    Result<vision::Grid> grid = info.ok() ? images_of(w).plan(*info) : Result<vision::Grid>(info.error());
    if (!grid.ok()) {
      w.error = SampleError{w.id, "image", grid.error().with_context(w.media[i].to_string()).to_string(),
                            grid.error().code()};
      return false;
    }
    w.infos.push_back(*info);
    w.grids.push_back(*grid);
  }
  check_facts(w);
  for (std::size_t v = 0; v < w.video_requests.size(); ++v) {
    auto plan = plan_within(videos_, video_bytes(w, v), w.video_requests[v], options_.max_buffered_bytes);
    if (!plan.ok()) {
      w.error = SampleError{w.id, "video", plan.error().with_context(w.video_uri(v).to_string()).to_string(),
                            plan.error().code()};
      return false;
    }
    w.video_plans.push_back(std::move(plan).value());
  }
  return true;
}

bool SampleProcessor::check_pixel_budget(Work& w) const {
  // The pixel rows the batch will hold for this sample, known from the headers before any
  // pixel is decoded: a sample that alone exceeds the byte budget can never be buffered.
  std::uint64_t pixel_bytes = 0;
  for (const vision::Grid& g : w.grids) pixel_bytes += static_cast<std::uint64_t>(g.rows()) * vision_.row_bytes();
  for (const vision::VideoPlan& p : w.video_plans) {
    pixel_bytes += static_cast<std::uint64_t>(p.grid.rows()) * videos_.row_bytes();
  }
  if (pixel_bytes > options_.max_buffered_bytes) {
    const std::size_t n = w.grids.size(), m = w.video_plans.size();
    const std::string what = m == 0   ? std::to_string(n) + (n == 1 ? " image needs " : " images need ")
                             : n == 0 ? std::to_string(m) + (m == 1 ? " video needs " : " videos need ")
                                      : std::to_string(n) + " images and " + std::to_string(m) + " videos need ";
    w.error = SampleError{w.id, w.video_plans.empty() ? "image" : "video",
                          "its " + what + std::to_string(pixel_bytes) +
                              " bytes of pixel rows, more than "
                              "max_buffered_bytes (" +
                              std::to_string(options_.max_buffered_bytes) + "); lower max_pixels or raise the budget",
                          ErrorCode::kResourceExhausted};
    return false;
  }
  return true;
}

Result<text::SftSample> SampleProcessor::encode_text(const Work& w) const {
  std::vector<text::Grid3> grids;
  for (const vision::Grid& g : w.grids) grids.push_back({g.t, g.h, g.w});
  std::vector<text::VideoGrid> video_grids;
  for (const vision::VideoPlan& p : w.video_plans) {
    video_grids.push_back(
        {{p.grid.t, p.grid.h, p.grid.w}, vision::second_per_grid_t(videos_.profile(), p), p.timestamps, 0});
  }
  const auto& tok = tokenizer_.get();  // waits for it once, at the start
  if (!tok.ok()) return tok.error();
  std::vector<std::int64_t> audio_tokens;
  for (const AudioClip& a : w.audio) {
    if (a.soundtrack)
      video_grids[a.index].audio_tokens = a.tokens;
    else
      audio_tokens.push_back(a.tokens);
  }
  return text::encode_conversation(*(*tok)->tok, w.conversation, template_of(w), grids, video_grids, audio_tokens,
                                   sft_);
}

bool SampleProcessor::check_trainable(Work& w, const text::SftSample& s) const {
  // A sample with no token to train adds nothing to the loss but its padding: a batch of them
  // would be a wasted step, or a NaN loss.
  if (std::none_of(s.labels.begin(), s.labels.end(), [](std::int32_t l) { return l != text::kIgnoreIndex; })) {
    const std::string reason =
        s.truncated ? "truncated to " + std::to_string(s.input_ids.size()) + " tokens (max_length " +
                          std::to_string(sft_.max_length) +
                          "), it keeps no token to train: its answer starts past the cut (raise max_length)"
                    : "it has no token to train: no assistant turn that the labels policy trains";
    w.error = SampleError{w.id, "text", reason, ErrorCode::kInvalidArgument};
    return false;
  }
  return true;
}

void SampleProcessor::drop_truncated_media(Work& w, const text::SftSample& s) const {
  // Truncation dropped trailing media: their bytes go now.
  if (s.images_kept < w.grids.size()) {
    w.grids.resize(s.images_kept);
    if (w.resized.size() > s.images_kept) w.resized.erase(w.resized.begin() + s.images_kept, w.resized.end());
    for (std::size_t i = s.images_kept; i < w.image_count; ++i) release_bytes(w, i, /*account=*/true);
  }
  if (s.videos_kept < w.video_plans.size()) {
    w.video_plans.resize(s.videos_kept);
    if (w.resized_videos.size() > s.videos_kept) {
      w.resized_videos.erase(w.resized_videos.begin() + s.videos_kept, w.resized_videos.end());
    }
    for (std::size_t v = s.videos_kept; v < w.video_requests.size(); ++v) {
      release_bytes(w, w.image_count + v, /*account=*/true);
    }
  }
  // Clips of dropped audio items and dropped videos' soundtracks (their bytes went when they
  // were loaded): truncation drops a tail of the media, so those kept stay a prefix.
  const auto kept = [&](const AudioClip& a) {
    return a.soundtrack ? a.index < s.videos_kept : a.index < s.audios_kept;
  };
  if (const auto cut = std::find_if_not(w.audio.begin(), w.audio.end(), kept); cut != w.audio.end()) {
    std::int64_t freed = 0;
    for (auto a = cut; a != w.audio.end(); ++a)
      freed += static_cast<std::int64_t>(a->features.capacity() * sizeof(float));
    w.audio.erase(cut, w.audio.end());
    hold(w, -freed);
  }
}

bool SampleProcessor::check_token_budget(Work& w, const text::SftSample& s) const {
  const PackingOptions& packing = options_.packing;
  if (const std::size_t in_row = packed_span(s.input_ids.size(), packing.format, packing.pad_to_multiple_of);
      packing.token_budget > 0 && in_row > packing.token_budget) {
    const std::string padded = in_row > s.input_ids.size() ? " (" + std::to_string(in_row) + " padded)" : "";
    w.error = SampleError{w.id, "text",
                          "sample has " + std::to_string(s.input_ids.size()) + " tokens" + padded +
                              ", more than token_budget " + std::to_string(packing.token_budget),
                          ErrorCode::kOutOfRange};
    return false;
  }
  return true;
}

bool SampleProcessor::load_audio_clips(Work& w) const {
  if (w.audio_requests.empty() && !w.soundtracks) return true;
  // Each clip's samples first: the padding (and so a clip's frames) may depend on all of them.
  struct Wave {
    std::vector<float> samples;
    bool soundtrack = false;
    std::size_t index = 0;   // the audio item's or the video's
    std::size_t medium = 0;  // its place in w.media
  };
  std::vector<Wave> waves;
  // The decoded samples count against the byte budget while they are held (until each clip's
  // features are computed, or the sample fails).
  struct HeldSamples {
    const SampleProcessor& processor;
    Work& w;
    std::int64_t bytes = 0;
    void add(std::int64_t delta) {
      processor.hold(w, delta);
      bytes += delta;
    }
    ~HeldSamples() {
      if (bytes != 0) processor.hold(w, -bytes);
    }
  } held{*this, w};
  const auto fail = [&](const Wave& clip, const Error& e) {
    std::string reason =
        e.with_context(w.media[clip.medium].to_string() + (clip.soundtrack ? "'s soundtrack" : "")).to_string();
    if (e.code() == ErrorCode::kResourceExhausted && e.message().ends_with(" a clip may hold")) {
      reason += " (max_buffered_bytes)";
    }
    w.error = SampleError{w.id, "audio", std::move(reason), e.code()};
    return false;
  };
  std::size_t next_audio = 0, next_video = 0;
  for (const text::ContentItem::Type kind : w.conversation.media_kinds()) {
    if (kind == text::ContentItem::Type::kImage || (kind == text::ContentItem::Type::kVideo && !w.soundtracks)) {
      next_video += kind == text::ContentItem::Type::kVideo;
      continue;
    }
    Wave clip;
    clip.soundtrack = kind == text::ContentItem::Type::kVideo;
    clip.index = clip.soundtrack ? next_video++ : next_audio++;
    clip.medium = clip.soundtrack ? w.image_count + clip.index : w.audio_index(clip.index);
    AudioLoadOptions o;
    // A soundtrack is read as qwen-omni-utils reads it: through FFmpeg, cut to the video's crop.
    o.soundtrack = clip.soundtrack;
    o.start =
        clip.soundtrack ? w.video_requests[clip.index].sampling.video_start : w.audio_requests[clip.index].audio_start;
    o.end = clip.soundtrack ? w.video_requests[clip.index].sampling.video_end : w.audio_requests[clip.index].audio_end;
    // Refused before it is decoded when its samples alone, at the file's own rate and resampled,
    // would pass the byte budget.
    o.max_bytes = options_.max_buffered_bytes;
    auto samples = load_audio(w.bytes.medium(clip.medium), o);
    // A video without an audio stream keeps its tokens alone, as transformers' processor keeps it.
    if (clip.soundtrack && !samples.ok() && samples.error().code() == ErrorCode::kNotFound) continue;
    if (!samples.ok()) return fail(clip, samples.error());
    if (!clip.soundtrack) release_bytes(w, clip.medium, /*account=*/true);  // a video's go once its frames are decoded
    clip.samples = std::move(samples).value();
    held.add(static_cast<std::int64_t>(clip.samples.capacity() * sizeof(float)));
    waves.push_back(std::move(clip));
  }
  // What the model's processor pads a clip to: Qwen2.5-Omni, its fixed 300 s (longer clips cut);
  // Qwen3-Omni, the longest clip of its call (here the sample's), which can move a clip's last
  // valid frame and so its tokens. Past the padding's own frames, the assembler pads with a
  // clip's silence (audio/features.h), which the models' masks drop.
  std::size_t padded = audio::kFixedSamples;
  if (audio_->pads_to_longest) {
    padded = 0;
    for (const Wave& clip : waves) padded = std::max(padded, clip.samples.size());
  }
  for (Wave& clip : waves) {
    std::vector<float>& wave = clip.samples;
    const auto wave_bytes = static_cast<std::int64_t>(wave.capacity() * sizeof(float));
    if (wave.size() > padded) wave.resize(padded);  // Qwen2.5-Omni's processor cuts a clip to its fixed length
    AudioClip out;
    out.soundtrack = clip.soundtrack;
    out.index = clip.index;
    out.valid_frames = audio::valid_frames(wave.size(), padded);
    out.tokens = audio_->tokens(out.valid_frames);
    if (out.tokens < 1) {
      return fail(clip, Error(ErrorCode::kInvalidArgument, "a clip of " + std::to_string(wave.size()) +
                                                               " samples at 16 kHz makes no audio token (" +
                                                               std::to_string(out.valid_frames) + " feature frames)"));
    }
    // Frame t reads samples [160 t - 200, 160 t + 200): from (n + 200) / 160 on, only padding.
    const std::size_t silent = (wave.size() + audio::kFftSize / 2 + audio::kHop - 1) / audio::kHop;
    out.frames = std::min(audio::frames_of(padded), silent + 1);
    out.features.resize(static_cast<std::size_t>(audio::kMelBins) * out.frames);
    audio::log_mel(wave, padded, out.frames, out.features.data(), out.frames);
    std::vector<float>().swap(wave);
    held.add(-wave_bytes);
    hold(w, static_cast<std::int64_t>(out.features.capacity() * sizeof(float)));
    w.audio.push_back(std::move(out));
  }
  return true;
}

bool SampleProcessor::decode_media(Work& w, bool account) const {
  core::TraceSpan span(trace_, "decode media", "cpu", w.id);
  const core::Stopwatch sw;
  bool ok = true;
  for (std::size_t i = 0; ok && i < w.grids.size(); ++i) {
    auto resized = images_of(w).resize(bytes_of(w, i), w.infos[i]);
    if (!resized.ok()) {
      w.error = SampleError{w.id, "image", resized.error().with_context(w.media[i].to_string()).to_string(),
                            resized.error().code()};
      ok = false;
      break;
    }
    w.resized.push_back(std::move(resized).value());
    release_bytes(w, i, account);
  }
  for (std::size_t v = 0; ok && v < w.video_plans.size(); ++v) {
    auto resized = videos_.resize(video_bytes(w, v), w.video_plans[v]);
    if (!resized.ok()) {
      w.error = SampleError{w.id, "video", resized.error().with_context(w.video_uri(v).to_string()).to_string(),
                            resized.error().code()};
      ok = false;
      break;
    }
    w.resized_videos.push_back(std::move(resized).value());
    release_bytes(w, w.image_count + v, account);
  }
  decode_ns_.record(static_cast<std::uint64_t>(sw.elapsed_ns()));
  return ok;
}

}  // namespace mmfeed::pipeline
