// mmfeed inspect: show one batch as the trainer will see it - tensor shapes, and each sample's
// text decoded with the trained (labelled) spans marked and image and video pads collapsed.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mmfeed/loader.h"
#include "mmfeed/numbers.h"
#include "mmfeed/text.h"
#include "tools/commands.h"
#include "tools/loader_flags.h"

namespace mmfeed::tools {

namespace {

int usage_error(const Error& e) {
  std::fprintf(stderr, "mmfeed inspect: %s\n", e.to_string().c_str());
  return 2;
}

// Batch `which` of the run; nullopt (after saying why) when the run fails or ends first.
std::optional<Batch> nth_batch(Loader& loader, long which) {
  std::optional<Batch> batch;
  for (long i = 0; i <= which; ++i) {
    auto r = loader.next();
    if (!r.ok()) {
      std::fprintf(stderr, "mmfeed inspect: %s\n", r.error().to_string().c_str());
      return std::nullopt;
    }
    batch = std::move(*r);
    if (!batch) {
      std::fprintf(stderr, "mmfeed inspect: the run has fewer than %ld batches\n", which + 1);
      return std::nullopt;
    }
  }
  return batch;
}

void print_shapes(const Batch& batch, long which) {
  std::printf("batch %ld (epoch %d): %zu samples\n", which, batch.epoch, batch.sample_ids.size());
  for (const Tensor& t : batch.tensors) {
    std::string shape;
    for (std::size_t d = 0; d < t.shape.size(); ++d) shape += (d ? ", " : "") + std::to_string(t.shape[d]);
    std::printf("  %-15s %-7s [%s]\n", t.name.c_str(), std::string(dtype_name(t.dtype)).c_str(), shape.c_str());
  }
}

// Sample s's tokens in the batch: [begin, end) of input_ids, padding left out.
std::pair<std::int64_t, std::int64_t> sample_span(const Batch& batch, std::size_t s) {
  const std::int64_t width = batch.find("input_ids")->shape[1];
  std::int64_t begin = static_cast<std::int64_t>(s) * width, end = begin + width;
  // Packed rows: where each sample starts (transformers' layout, or Megatron's padded one).
  const Tensor* cu_t = batch.find("cu_seq_lens_q");
  if (cu_t == nullptr) cu_t = batch.find("cu_seqlens_padded");
  // Padded rows: where each sample's tokens end (the attention mask's ones; rows pad on the right).
  const Tensor* mask_t = batch.find("attention_mask");
  if (cu_t) {
    const auto* cu = static_cast<const std::int32_t*>(batch.data(*cu_t));
    begin = cu[s];
    end = cu[s + 1];
    if (const Tensor* real = batch.find("cu_seqlens")) {  // Megatron's: the sample, not its padding
      const auto* lengths = static_cast<const std::int32_t*>(batch.data(*real));
      end = begin + (lengths[s + 1] - lengths[s]);
    }
  } else if (mask_t != nullptr) {
    const auto* mask = static_cast<const std::int64_t*>(batch.data(*mask_t));
    std::int64_t ones = 0;
    for (std::int64_t j = begin; j < end; ++j) ones += mask[j];
    end = begin + ones;
  }
  return {begin, end};
}

// Sample s's text, decoded run by run: trained runs between `on` and `off`, each run of one
// media placeholder (`pads`) collapsed to "<|...|>xN".
void print_sample(const Batch& batch, std::size_t s, const Tokenizer& tok, std::map<std::int64_t, std::string>& pads,
                  const char* on, const char* off) {
  const auto* ids = static_cast<const std::int64_t*>(batch.data(*batch.find("input_ids")));
  const auto* labels = static_cast<const std::int64_t*>(batch.data(*batch.find("labels")));
  const auto [begin, end] = sample_span(batch, s);
  std::printf("\n--- %s ---\n", batch.sample_ids[s].c_str());
  // Whether token j is trained: its label, or in Megatron's rows (labels shifted to the next
  // token) the label before it.
  const bool shifted = batch.find("cu_seqlens") != nullptr;
  auto is_trained = [&](std::int64_t j) { return shifted ? j > begin && labels[j - 1] != -100 : labels[j] != -100; };
  std::int64_t j = begin;
  while (j < end) {
    const bool trained = is_trained(j);
    std::string piece;
    std::vector<std::int32_t> run;
    std::int64_t pad = -1, count = 0;  // a run of one placeholder, collapsed
    auto flush_pads = [&] {
      if (count == 0) return;
      piece += tok.decode(run) + pads[pad] + "x" + std::to_string(count);
      run.clear();
      count = 0;
    };
    while (j < end && is_trained(j) == trained) {
      if (pads.contains(ids[j])) {
        if (ids[j] != pad) flush_pads();
        pad = ids[j];
        ++count;
      } else {
        flush_pads();
        run.push_back(static_cast<std::int32_t>(ids[j]));
      }
      ++j;
    }
    flush_pads();
    piece += tok.decode(run);
    std::printf(trained ? "%s%s%s" : "%.0s%s%.0s", on, piece.c_str(), off);
  }
  std::printf("\n");
}

}  // namespace

int run_inspect(int argc, char** argv) {
  LoaderConfig config;  // the Loader's defaults: batch 0 is the first batch a trainer gets
  long which = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: mmfeed inspect [--batch N] [loader options] MANIFEST...\n"
          "Shows batch N (default 0) as the Loader with the same options delivers it: tensor shapes and\n"
          "each sample's decoded text, trained spans marked. Takes the loader options `mmfeed run` takes\n"
          "(--batch-size 2 shows fewer samples; --no-shuffle the manifest's order):\n\n%s",
          loader_flags_usage().c_str());
      return 0;
    }
    if (arg == "--batch") {
      auto n = parse_number<long>("--batch", i + 1 < argc ? argv[++i] : "", 0, INT32_MAX);
      if (!n.ok()) return usage_error(n.error());
      which = *n;
    } else if (auto applied = apply_loader_flag(config, argc, argv, i)) {
      if (!applied->ok()) return usage_error(applied->error());
    } else if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "mmfeed inspect: unknown option %s\n", arg.c_str());
      return 2;
    } else {
      config.manifests.push_back(arg);
    }
  }
  auto loader = Loader::open(config);  // checks the options as `mmfeed run` does, the tokenizer's first
  if (!loader.ok()) return usage_error(loader.error());
  auto tok = Tokenizer::from_file(config.tokenizer);
  if (!tok.ok()) return usage_error(tok.error());
  const std::optional<Batch> batch = nth_batch(**loader, which);
  if (!batch) return 1;
  const bool color = isatty(STDOUT_FILENO);
  const char* on = color ? "\033[1;32m" : "[[";
  const char* off = color ? "\033[0m" : "]]";
  print_shapes(*batch, which);
  // The media placeholders of the Qwen-VL and Omni vocabularies, each run shown as "<|...|>xN".
  std::map<std::int64_t, std::string> pads;
  for (const char* name : {"<|image_pad|>", "<|video_pad|>", "<|audio_pad|>", "<|IMAGE|>", "<|VIDEO|>", "<|AUDIO|>"}) {
    if (auto id = tok->token_to_id(name)) pads[*id] = name;
  }
  std::printf("\ntrained tokens are shown %sLIKE THIS%s\n", on, off);
  for (std::size_t s = 0; s < batch->sample_ids.size(); ++s) print_sample(*batch, s, *tok, pads, on, off);
  return 0;
}

}  // namespace mmfeed::tools
