// The Loader's options, listed once. Each row names an option (the Python keyword and the
// config-file key; `mmfeed run` takes it as --name-with-dashes), the LoaderConfig member it sets
// and a one-line doc; the default is the member's in LoaderConfig{}. The Python binding, the CLI's
// flags and config files, and the Python docstring are made from this list, and tests check that
// each accepts every option, so they cannot drift. A new option: a member in loader.h, a row here.
//
// Example:
//   LoaderConfig c;
//   MMFEED_RETURN_IF_ERROR(set_loader_option(c, "batch_size", "16"));
//   MMFEED_RETURN_IF_ERROR(set_loader_option(c, "shard_remainder", "drop"));
//   for (const LoaderOptionInfo& o : loader_options()) std::printf("%s = %s\n", o.name.c_str(),
//   o.default_text.c_str());
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"
#include "mmfeed/loader.h"

namespace mmfeed {

// Calls f(name, member pointer, doc) for every option of LoaderConfig, in this order.
template <class F>
void for_each_loader_option(F&& f) {
  f("manifests", &LoaderConfig::manifests,
    "the sources: JSONL or JSON array manifests (plain, gzip or zstd), WebDataset shards (.tar, brace patterns), "
    "Energon dataset directories, Parquet files (.parquet, brace patterns); paths, file://, s3:// or http(s):// URIs");
  f("media_root", &LoaderConfig::media_root,
    "where relative media references resolve (a directory or URI prefix): one for all manifests, or one per "
    "manifest (empty: each manifest's own directory)");
  f("weights", &LoaderConfig::weights,
    "a blend: one weight per manifest; each epoch draws blend_samples samples, each manifest its share, cycling "
    "through its own shuffled epochs (empty: the manifests concatenated)");
  f("blend_samples", &LoaderConfig::blend_samples, "samples in an epoch of a blend (0: the manifests' total)");
  f("source_repeats", &LoaderConfig::source_repeats,
    "a blend by repeats, one per manifest: each drawn this many times its size per epoch (instead of weights)");
  f("source_max_pixels", &LoaderConfig::source_max_pixels,
    "one per manifest: its images' max_pixels (0: max_pixels); empty: max_pixels for all");
  f("source_chat_template", &LoaderConfig::source_chat_template,
    "one per manifest: its chat template (empty string: chat_template); empty: chat_template for all");
  f("tokenizer", &LoaderConfig::tokenizer, "the model's tokenizer.json (required)");
  f("model", &LoaderConfig::model,
    "image, video and audio profile and default chat template: qwen2-vl, qwen2.5-vl, qwen3-vl, qwen3.5, "
    "qwen2.5-omni, qwen3-omni (its template: qwen3-omni-thinking)");
  f("min_pixels", &LoaderConfig::min_pixels, "smallest image area after resizing (0: the model's)");
  f("max_pixels", &LoaderConfig::max_pixels, "largest image area after resizing (0: the model's)");
  f("pixels", &LoaderConfig::pixels,
    "pixel_values as float32 (HF's), bfloat16, or uint8 (unnormalized, for mmfeed.normalize_pixels on the GPU)");
  f("image_backend", &LoaderConfig::image_backend,
    "which transformers image processor images match bit for bit: pil (Qwen2VLImageProcessorPil) or torchvision "
    "(Qwen2VLImageProcessor, transformers' default where torchvision is installed)");
  f("alpha", &LoaderConfig::alpha,
    "what a transparent image's alpha becomes: drop (Pillow's convert(\"RGB\"), as transformers' load_image "
    "reads a path or URL), white (composited on white, as transformers' processor treats a PIL image from "
    "`datasets`) or paste (qwen-vl-utils' to_rgb)");
  f("chat_template", &LoaderConfig::chat_template,
    "qwen2-vl, qwen3-vl, qwen3-vl-thinking, qwen3.5, qwen3.5-nothink, qwen2.5-omni or qwen3-omni-thinking (empty: "
    "the model's)");
  f("audio_padding", &LoaderConfig::audio_padding,
    "input_features padded as the model's processor pads them (model: Qwen2.5-Omni's 300 s per clip, Qwen3-Omni's "
    "longest clip), to Qwen2.5-Omni's fixed length (max_length) or to the batch's longest clip (longest: the same "
    "values, fewer frames)");
  f("use_audio_in_video", &LoaderConfig::use_audio_in_video,
    "the Omni models: each video brings its soundtrack, interleaved with its tokens (a video without audio keeps its "
    "own); a sample's \"use_audio_in_video\" overrides it");
  f("batch_size", &LoaderConfig::batch_size, "samples per padded batch");
  f("pad_to_multiple_of", &LoaderConfig::pad_to_multiple_of,
    "> 1: sequence lengths (padded or packed) rounded up to a multiple of this");
  f("token_budget", &LoaderConfig::token_budget,
    "> 0: pack samples into rows of at most this many tokens (input_ids [1, T], laid out as packed_format says)");
  f("pack_window", &LoaderConfig::pack_window, "samples considered together when packing");
  f("packed_format", &LoaderConfig::packed_format,
    "packed rows as hf (transformers: position_ids [4, 1, T], cu_seq_lens_q/k; Qwen3.5 also seq_idx) or thd "
    "(Megatron's PackedSeqParams, "
    "each sample padded to pad_to_multiple_of)");
  f("mrope", &LoaderConfig::mrope,
    "position_ids [3, B, L]: Qwen-VL's 3-D rotary positions (false: none; thd rows: the text row alone)");
  f("seed", &LoaderConfig::seed, "the shuffle's seed");
  f("shuffle", &LoaderConfig::shuffle, "shuffle the samples each epoch (false: manifest order)");
  f("epochs", &LoaderConfig::epochs, "passes over the data");
  f("end_position", &LoaderConfig::end_position,
    "> 0: end at this position of the last epoch (a multiple of batch_size, or of pack_window when packing)");
  f("rank", &LoaderConfig::rank, "this data-parallel rank");
  f("world_size", &LoaderConfig::world_size, "data-parallel ranks");
  f("shard_remainder", &LoaderConfig::shard_remainder,
    "when world_size does not divide the samples: pad (equal shards, at most world_size - 1 samples twice), "
    "drop (equal, at most world_size - 1 left out) or keep (disjoint, ranks may differ by one)");
  f("balance", &LoaderConfig::balance,
    "split each optimizer step's samples across the ranks by cost: none (as drawn), tokens, or compute (FLOPs of "
    "tokens and vision patches); the same samples per rank, the largest rank's cost least (packed: a packing window "
    "at a time)");
  f("gradient_accumulation_steps", &LoaderConfig::gradient_accumulation_steps,
    "batches a rank takes per optimizer step: what balance splits together");
  f("balance_cost", &LoaderConfig::balance_cost,
    "balance=compute's FLOPs per LLM token, LLM token pair, vision patch, vision patch pair (empty: Qwen2-VL-7B's; "
    "mmfeed.Loader also takes \"calibrated\": fitted to the ranks' reported step times during the run)");
  f("mode", &LoaderConfig::mode, "concurrent, or serial: one sample after another on the caller's thread");
  f("ordered", &LoaderConfig::ordered,
    "false: batches take samples as they finish (no waiting for a slow one; no resume)");
  f("workers", &LoaderConfig::workers,
    "CPU threads for the per-sample work, 1 to 1024; 0 or auto: the usable cores / LOCAL_WORLD_SIZE, less one");
  f("prefetch_batches", &LoaderConfig::prefetch_batches,
    "batches prepared ahead of the trainer, 1 to 1024; 0 or auto: grows from 1 while the trainer waits");
  f("max_buffered_bytes", &LoaderConfig::max_buffered_bytes,
    "bytes held between fetch and trainer; a sample that alone needs more is refused");
  f("fetch_inflight", &LoaderConfig::fetch_inflight, "GETs in flight, 1 to 4096");
  f("max_object_bytes", &LoaderConfig::max_object_bytes, "largest image fetched (declared or read)");
  f("max_manifest_bytes", &LoaderConfig::max_manifest_bytes,
    "largest manifest, fetched and decompressed (a Parquet file: its rows decoded); also bounds a blend epoch's order, "
    "20 bytes a draw");
  f("cache_dir", &LoaderConfig::cache_dir,
    "node-local folder where a JSONL/JSON manifest's index is kept: a local one without an index beside it, and a "
    "remote one (its uploaded index fetched, else built), indexed once a node (first rank, under a lock) and opened "
    "from then on (empty: none; remote manifests are then read whole); local tar shards without a .tar.idx beside "
    "them get theirs there the same way");
  f("max_images_per_sample", &LoaderConfig::max_images_per_sample, "most images and videos one sample may name");
  f("allow_local_media_from_remote_manifest", &LoaderConfig::allow_local_media_from_remote_manifest,
    "let a manifest fetched from http(s):// or s3:// name local files (absolute paths, file:// URIs)");
  f("max_length", &LoaderConfig::max_length, "tokens per sample (0: no limit)");
  f("truncation", &LoaderConfig::truncation, "a sample over max_length: error, or truncate");
  f("labels", &LoaderConfig::labels, "which tokens are trained: qwen (assistant replies), or content_and_eos");
  f("train_reasoning", &LoaderConfig::train_reasoning,
    "with the Qwen3-VL Thinking template, train the <think> block (false: -100)");
  f("on_error", &LoaderConfig::on_error, "a bad sample: skip (reported in errors()), or fail the run");
  f("max_error_fraction", &LoaderConfig::max_error_fraction,
    "skipped / seen beyond this fails the run (from the 20th sample, and at the end), 0 to 1");
  f("trace_path", &LoaderConfig::trace_path, "write a Chrome-trace / Perfetto timeline here on close");
  f("pin_memory", &LoaderConfig::pin_memory, "page-locked batch buffers when a CUDA runtime is present");
  f("pin_device", &LoaderConfig::pin_device, "the GPU that page-locks them (-1: cuda_device, else LOCAL_RANK, else 0)");
  f("cuda_device", &LoaderConfig::cuda_device,
    ">= 0: batches delivered on this CUDA device, copied two ahead by the engine's own thread and stream "
    "(-1: host batches)");
}

// An option as text, for help screens and docstrings.
struct LoaderOptionInfo {
  std::string name;
  std::string type;          // "str", "list[str]", "int", "float", "bool", or the choices "pad|drop|keep"
  std::string default_text;  // LoaderConfig{}'s value, as the type reads it ("" for an empty string)
  std::string doc;
};
std::vector<LoaderOptionInfo> loader_options();

// Whether option `name` chooses its value itself when given 0, and so also takes "auto" (workers,
// prefetch_batches): in the CLI, config files and Python alike.
inline bool takes_auto(std::string_view name) { return name == "workers" || name == "prefetch_batches"; }

// Sets option `name` from its text: numbers in decimal, booleans true/false, a choice by name, a
// list option appends one item. An error names the option and what it takes.
Status set_loader_option(LoaderConfig& config, std::string_view name, std::string_view text);

}  // namespace mmfeed
