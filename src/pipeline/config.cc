#include "pipeline/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/cpus.h"
#include "device/cuda_runtime.h"
#include "vision/profile.h"

namespace mmfeed::pipeline {

namespace {

// Upper bounds of the options that size threads and queues: beyond them a typo, not a plan.
constexpr int kMaxWorkers = 1024;
constexpr std::size_t kMaxInflight = 4096;
constexpr std::size_t kMaxPrefetch = 1024;
constexpr std::size_t kMaxPackWindow = 1 << 16;
constexpr std::size_t kMaxBatch = 1 << 20;

}  // namespace

int auto_workers(int usable_cpus, const char* local_world_size) {
  int ranks = 1;
  if (local_world_size != nullptr) {
    const std::string_view text(local_world_size);
    int n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec == std::errc() && end == text.data() + text.size() && n > 0) ranks = n;
  }
  return std::max(1, usable_cpus / ranks - 1);
}

Error config_error(const std::string& field, const std::string& message) {
  return Error(ErrorCode::kInvalidArgument, message, "LoaderConfig." + field);
}

namespace {

// An Omni template needs a model with that Omni model's audio encoder (and so its image, video
// and audio settings): qwen2.5-omni's with model="qwen2.5-omni", qwen3-omni-thinking's with
// model="qwen3-omni".
Status check_omni_template(text::ChatTemplate tmpl, const ModelRow& model, const std::string& field) {
  const AudioEncoder needs = tmpl == text::ChatTemplate::kQwen2_5Omni         ? AudioEncoder::kQwen2_5Omni
                             : tmpl == text::ChatTemplate::kQwen3OmniThinking ? AudioEncoder::kQwen3Omni
                                                                              : AudioEncoder::kNone;
  if (needs != AudioEncoder::kNone && model.audio != needs) {
    const char* omni = needs == AudioEncoder::kQwen2_5Omni ? "qwen2.5-omni" : "qwen3-omni";
    return config_error(field, "the " + std::string(text::chat_template_name(tmpl)) + " template needs model=\"" +
                                   omni + "\" (its image, video and audio settings), not \"" + model.name + "\"");
  }
  return ok_status();
}

// The sources: manifests, roots, a blend's weights, the per-manifest lists.
Status check_sources(const LoaderConfig& config) {
  if (config.manifests.empty()) return config_error("manifests", "no manifest given");
  if (config.tokenizer.empty()) return config_error("tokenizer", "no tokenizer.json given");
  if (config.media_root.size() > 1 && config.media_root.size() != config.manifests.size()) {
    return config_error("media_root", "names " + std::to_string(config.media_root.size()) + " roots for " +
                                          std::to_string(config.manifests.size()) +
                                          " manifests: give one for all, or one per manifest");
  }
  if (!config.weights.empty() && !config.source_repeats.empty()) {
    return config_error("source_repeats", "and weights both blend the manifests: give one of them");
  }
  for (const auto& [field, values] :
       {std::pair{"weights", &config.weights}, std::pair{"source_repeats", &config.source_repeats}}) {
    if (values->empty()) continue;
    if (values->size() != config.manifests.size()) {
      return config_error(field, "names " + std::to_string(values->size()) + " values for " +
                                     std::to_string(config.manifests.size()) + " manifests: give one per manifest");
    }
    double sum = 0;
    for (const double w : *values) {
      if (!std::isfinite(w) || w < 0) return config_error(field, "must be finite and >= 0, not " + std::to_string(w));
      sum += w;
    }
    if (!(sum > 0)) return config_error(field, "are all 0: give at least one manifest a positive value");
  }
  if (config.weights.empty() && config.source_repeats.empty() && config.blend_samples > 0) {
    return config_error("blend_samples", "sizes a blend's epoch: give weights (or source_repeats), one per manifest");
  }
  for (const auto& [field, count] : {std::pair{"source_max_pixels", config.source_max_pixels.size()},
                                     std::pair{"source_chat_template", config.source_chat_template.size()}}) {
    if (count != 0 && count != config.manifests.size()) {
      return config_error(field, "names " + std::to_string(count) + " values for " +
                                     std::to_string(config.manifests.size()) + " manifests: give one per manifest");
    }
  }
  return ok_status();
}

// Balancing the ranks (balance.h): a step of at most kMaxBatch samples a rank, four finite
// non-negative coefficients.
Status check_balance(const LoaderConfig& config) {
  const std::size_t steps = config.gradient_accumulation_steps;
  if (steps == 0 || steps > std::max<std::size_t>(1, kMaxBatch / config.batch_size)) {
    return config_error("gradient_accumulation_steps", "must be 1 to " + std::to_string(kMaxBatch / config.batch_size) +
                                                           " (a rank's samples a step, " +
                                                           "gradient_accumulation_steps x batch_size, at most " +
                                                           std::to_string(kMaxBatch) + ")");
  }
  if (!config.balance_cost.empty()) {
    if (config.balance_cost.size() != 4) {
      return config_error("balance_cost",
                          "takes four coefficients (FLOPs per LLM token, LLM token pair, vision patch, vision patch "
                          "pair), not " +
                              std::to_string(config.balance_cost.size()));
    }
    for (const double c : config.balance_cost) {
      if (!std::isfinite(c) || c < 0 || c > 1e15) return config_error("balance_cost", "each must be 0 to 1e15");
    }
  }
  return ok_status();
}

// The batches: their size, packing, ranks, epochs and end.
Status check_batches(const LoaderConfig& config) {
  if (config.batch_size == 0) return config_error("batch_size", "must be positive");
  if (config.token_budget > 0 && config.pack_window == 0) return config_error("pack_window", "must be positive");
  // Packed rows carry int32 offsets (cu_seq_lens_q, cu_seqlens), as flash attention takes them.
  if (config.token_budget > (std::size_t{1} << 30)) return config_error("token_budget", "must be at most 1073741824");
  // transformers reads a packed row's samples apart only from position_ids [4, 1, T]: the text
  // row and the three mrope rows.
  if (config.token_budget > 0 && config.packed_format == PackedFormat::kHf && !config.mrope) {
    return config_error("mrope",
                        "packed_format hf needs the mrope positions (transformers keeps the samples of a "
                        "packed row apart only with position_ids [4, 1, T]); use packed_format thd or mrope");
  }
  if (config.pad_to_multiple_of > (std::size_t{1} << 20))
    return config_error("pad_to_multiple_of", "must be at most 1048576");
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size) {
    return config_error(
        "rank", "rank " + std::to_string(config.rank) + " is outside world_size " + std::to_string(config.world_size));
  }
  if (config.epochs < 1) return config_error("epochs", "must be at least 1");
  MMFEED_RETURN_IF_ERROR(check_balance(config));
  if (const std::size_t group = group_positions(config); config.end_position % group != 0) {
    return config_error("end_position", "must be a multiple of " +
                                            std::string(config.token_budget > 0 ? "pack_window (" : "batch_size (") +
                                            std::to_string(group) + "), not " + std::to_string(config.end_position));
  }
  return ok_status();
}

// Threads, memory and the device.
Status check_resources(const LoaderConfig& config) {
  if (config.workers < 0 || config.workers > kMaxWorkers) {
    return config_error("workers", "must be 1 to " + std::to_string(kMaxWorkers) + ", or 0 (auto), not " +
                                       std::to_string(config.workers));
  }
  if (config.fetch_inflight < 1 || config.fetch_inflight > kMaxInflight) {
    return config_error("fetch_inflight", "must be 1 to " + std::to_string(kMaxInflight) + ", not " +
                                              std::to_string(config.fetch_inflight));
  }
  if (config.prefetch_batches > kMaxPrefetch) {
    return config_error("prefetch_batches", "must be 1 to " + std::to_string(kMaxPrefetch) + ", or 0 (auto), not " +
                                                std::to_string(config.prefetch_batches));
  }
  if (config.pack_window > kMaxPackWindow)
    return config_error("pack_window", "must be at most " + std::to_string(kMaxPackWindow));
  if (config.batch_size > kMaxBatch) return config_error("batch_size", "must be at most " + std::to_string(kMaxBatch));
  if (!(config.max_error_fraction >= 0.0 && config.max_error_fraction <= 1.0)) {  // NaN fails both
    return config_error("max_error_fraction",
                        "must be a fraction from 0 to 1, not " + std::to_string(config.max_error_fraction));
  }
  if (config.min_pixels < 0) return config_error("min_pixels", "must be positive (0: the model's)");
  if (config.max_pixels < 0) return config_error("max_pixels", "must be positive (0: the model's)");
  if (config.max_buffered_bytes == 0) return config_error("max_buffered_bytes", "must be positive");
  if (config.max_object_bytes == 0) return config_error("max_object_bytes", "must be positive");
  if (config.max_manifest_bytes == 0) return config_error("max_manifest_bytes", "must be positive");
  if (config.max_images_per_sample == 0) return config_error("max_images_per_sample", "must be positive");
  if (config.pin_device < -1) return config_error("pin_device", "must be a device index, or -1 to choose");
  if (const auto& cuda = device::CudaRuntime::get();
      config.pin_memory && cuda.available() && config.pin_device >= cuda.device_count()) {
    return config_error("pin_device", std::to_string(config.pin_device) + " names no device (" + cuda.describe() + ")");
  }
  if (config.cuda_device < -1) return config_error("cuda_device", "must be a device index, or -1 for host batches");
  return ok_status();
}

// The model's row and what it sets: images, videos, the chat template, audio.
Status media_settings(const LoaderConfig& config, Settings& out) {
  auto model = find_model(config.model);
  if (!model.ok()) return config_error("model", model.error().message());
  out.model = *model;
  out.vision.profile = vision::model_profile(*out.model);
  if (config.min_pixels > 0) out.vision.profile.min_pixels = config.min_pixels;
  if (config.max_pixels > 0) out.vision.profile.max_pixels = config.max_pixels;
  if (out.vision.profile.min_pixels > out.vision.profile.max_pixels) {
    return config_error("min_pixels", "min_pixels " + std::to_string(out.vision.profile.min_pixels) +
                                          " exceeds max_pixels " + std::to_string(out.vision.profile.max_pixels));
  }
  out.vision.backend = config.image_backend;
  out.vision.decode.alpha = config.alpha;
  out.vision.output = config.pixels;
  out.video = vision::video_profile(*out.model);
  const std::string& template_name = config.chat_template.empty() ? out.model->default_template : config.chat_template;
  MMFEED_ASSIGN_OR_RETURN(out.chat_template, text::chat_template(template_name));
  out.audio = audio::audio_model(*out.model);
  MMFEED_RETURN_IF_ERROR(check_omni_template(out.chat_template, *out.model, "chat_template"));
  if (config.use_audio_in_video && !out.audio) {
    return config_error("use_audio_in_video",
                        "needs a model with audio (" + model_names(true) + "), not \"" + config.model + "\"");
  }
  return ok_status();
}

// source_max_pixels and source_chat_template, one per manifest.
Status source_settings(const LoaderConfig& config, Settings& out) {
  for (std::size_t i = 0; i < config.source_max_pixels.size(); ++i) {
    const std::int64_t max = config.source_max_pixels[i];
    vision::ProcessorConfig& v = out.source_vision.emplace_back(out.vision);
    if (max < 0)
      return config_error("source_max_pixels", "must be positive (0: max_pixels), not " + std::to_string(max));
    if (max > 0) v.profile.max_pixels = max;
    if (v.profile.min_pixels > v.profile.max_pixels) {
      return config_error("source_max_pixels", "manifest " + std::to_string(i) + "'s " + std::to_string(max) +
                                                   " is below min_pixels " + std::to_string(v.profile.min_pixels));
    }
  }
  for (const std::string& name : config.source_chat_template) {
    if (name.empty()) {
      out.source_templates.push_back(out.chat_template);
      continue;
    }
    auto t = text::chat_template(name);
    if (!t.ok()) return config_error("source_chat_template", t.error().message());
    MMFEED_RETURN_IF_ERROR(check_omni_template(*t, *out.model, "source_chat_template"));
    out.source_templates.push_back(*t);
  }
  return ok_status();
}

text::SftOptions sft_options(const LoaderConfig& config, const Settings& out) {
  text::SftOptions sft;
  sft.max_length = config.max_length;
  sft.truncation = config.truncation;
  sft.labels = config.labels;
  sft.merge_size = out.vision.profile.merge_size;
  // The Omni templates step by their own model's rate and order of arithmetic (chat_encode.cc).
  sft.tokens_per_second = out.model->audio == AudioEncoder::kNone ? out.model->tokens_per_second : 0;
  sft.train_reasoning = config.train_reasoning;
  sft.mrope_position_ids = config.mrope;
  return sft;
}

}  // namespace

OrderOptions order_options(const LoaderConfig& config) {
  return OrderOptions{.seed = config.seed,
                      .shuffle = config.shuffle,
                      .rank = config.rank,
                      .world_size = config.world_size,
                      .remainder = config.shard_remainder,
                      .epochs = config.epochs,
                      .end_position = config.end_position,
                      // Packed: a packing window of each rank's balanced at a time (its rows come
                      // from it alone, however many the budget makes).
                      .balance_batch = config.balance == Balance::kNone ? 0 : group_positions(config),
                      .balance_batches = config.token_budget > 0 ? 1 : config.gradient_accumulation_steps};
}

namespace {

// Each stage's few options, from the resolved `c` (workers known).
void stage_options(const LoaderConfig& c, Settings& out) {
  const PackingOptions packing{
      .token_budget = c.token_budget, .format = c.packed_format, .pad_to_multiple_of = c.pad_to_multiple_of};
  out.order = order_options(c);
  out.sample = SampleOptions{.model = c.model,
                             .max_images_per_sample = c.max_images_per_sample,
                             .max_object_bytes = c.max_object_bytes,
                             .max_buffered_bytes = c.max_buffered_bytes,
                             .max_manifest_bytes = c.max_manifest_bytes,
                             .media_root = c.media_root,
                             .allow_local_media_from_remote_manifest = c.allow_local_media_from_remote_manifest,
                             .use_audio_in_video = c.use_audio_in_video,
                             .packing = packing};
  out.batch = BatchOptions{.group_positions = group_positions(c),
                           .packing = packing,
                           .mrope = c.mrope,
                           .audio_padding = c.audio_padding,
                           .workers = std::max(1, c.workers)};
  out.drive = DriveOptions{.order = out.order,
                           .packed = c.token_budget > 0,
                           .ordered = c.ordered,
                           .workers = std::max(1, c.workers),
                           .batch_size = c.batch_size,
                           .prefetch_batches = c.prefetch_batches,
                           .max_buffered_bytes = c.max_buffered_bytes};
}

}  // namespace

Result<Settings> check_config(const LoaderConfig& config) {
  MMFEED_RETURN_IF_ERROR(check_sources(config));
  MMFEED_RETURN_IF_ERROR(check_batches(config));
  MMFEED_RETURN_IF_ERROR(check_resources(config));
  Settings out;
  out.options = config;
  if (config.cuda_device >= 0 && config.pin_device < 0) out.options.pin_device = config.cuda_device;
  if (config.workers == 0) out.options.workers = auto_workers(core::usable_cpus(), std::getenv("LOCAL_WORLD_SIZE"));
  MMFEED_RETURN_IF_ERROR(media_settings(config, out));
  MMFEED_RETURN_IF_ERROR(source_settings(config, out));
  out.sft = sft_options(config, out);
  stage_options(out.options, out);
  return out;
}

}  // namespace mmfeed::pipeline
