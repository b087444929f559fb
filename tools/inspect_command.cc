// mmfeed inspect: show one batch as the trainer will see it - tensor shapes, and each sample's
// text decoded with the trained (labelled) spans marked and image and video pads collapsed.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mmfeed/loader.h"
#include "mmfeed/loader_options.h"
#include "mmfeed/numbers.h"
#include "mmfeed/text.h"
#include "tools/commands.h"

namespace mmfeed::tools {

namespace {

int usage_error(const Error& e) {
  std::fprintf(stderr, "mmfeed inspect: %s\n", e.to_string().c_str());
  return 2;
}

}  // namespace

int run_inspect(int argc, char** argv) {
  LoaderConfig config;
  config.batch_size = 2;
  config.shuffle = false;
  long which = 0;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--help" || arg == "-h") {
      std::puts(
          "usage: mmfeed inspect MANIFEST --tokenizer FILE [--batch N] [--batch-size N] [--max-pixels N]\n"
          "       [--model NAME] [--token-budget N] [--seed N --shuffle]\n"
          "Shows batch N (default 0): tensor shapes and each sample's decoded text, trained spans marked.");
      return 0;
    } else if (arg == "--tokenizer") {
      config.tokenizer = value();
    } else if (arg == "--batch") {
      auto n = parse_number<long>("--batch", value(), 0, INT32_MAX);
      if (!n.ok()) return usage_error(n.error());
      which = *n;
    } else if (arg == "--batch-size" || arg == "--max-pixels" || arg == "--token-budget" || arg == "--seed") {
      // Read by the loader's own option parser, range-checked for the option's type.
      std::string option = arg.substr(2);
      for (char& ch : option) ch = ch == '-' ? '_' : ch;
      if (Status st = set_loader_option(config, option, value()); !st.ok()) return usage_error(st.error());
    } else if (arg == "--model") {
      config.model = value();
    } else if (arg == "--shuffle") {
      config.shuffle = true;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "mmfeed inspect: unknown option %s\n", arg.c_str());
      return 2;
    } else {
      config.manifests.push_back(arg);
    }
  }
  auto tok = Tokenizer::from_file(config.tokenizer);
  if (!tok.ok()) {
    std::fprintf(stderr, "mmfeed inspect: %s\n", tok.error().to_string().c_str());
    return 2;
  }
  auto loader = Loader::open(config);
  if (!loader.ok()) {
    std::fprintf(stderr, "mmfeed inspect: %s\n", loader.error().to_string().c_str());
    return 2;
  }
  std::optional<Batch> batch;
  for (long i = 0; i <= which; ++i) {
    auto r = (*loader)->next();
    if (!r.ok()) {
      std::fprintf(stderr, "mmfeed inspect: %s\n", r.error().to_string().c_str());
      return 1;
    }
    batch = std::move(*r);
    if (!batch) {
      std::fprintf(stderr, "mmfeed inspect: the run has fewer than %ld batches\n", which + 1);
      return 1;
    }
  }
  const bool color = isatty(STDOUT_FILENO);
  const char* on = color ? "\033[1;32m" : "[[";
  const char* off = color ? "\033[0m" : "]]";
  std::printf("batch %ld (epoch %d): %zu samples\n", which, batch->epoch, batch->sample_ids.size());
  for (const Tensor& t : batch->tensors) {
    std::string shape;
    for (std::size_t d = 0; d < t.shape.size(); ++d) shape += (d ? ", " : "") + std::to_string(t.shape[d]);
    std::printf("  %-15s %-7s [%s]\n", t.name.c_str(), std::string(dtype_name(t.dtype)).c_str(), shape.c_str());
  }
  const Tensor* ids_t = batch->find("input_ids");
  const Tensor* labels_t = batch->find("labels");
  // Packed rows: where each sample starts (transformers' layout, or Megatron's padded one).
  const Tensor* cu_t = batch->find("cu_seq_lens_q");
  if (cu_t == nullptr) cu_t = batch->find("cu_seqlens_padded");
  const auto* ids = static_cast<const std::int64_t*>(batch->data(*ids_t));
  const auto* labels = static_cast<const std::int64_t*>(batch->data(*labels_t));
  const std::int64_t width = ids_t->shape[1];
  const auto image_pad = tok->token_to_id("<|image_pad|>").value_or(-1);
  const auto video_pad = tok->token_to_id("<|video_pad|>").value_or(-1);
  std::printf("\ntrained tokens are shown %sLIKE THIS%s\n", on, off);
  for (std::size_t s = 0; s < batch->sample_ids.size(); ++s) {
    std::int64_t begin = static_cast<std::int64_t>(s) * width, end = begin + width;
    if (cu_t) {
      const auto* cu = static_cast<const std::int32_t*>(batch->data(*cu_t));
      begin = cu[s];
      end = cu[s + 1];
      if (const Tensor* real = batch->find("cu_seqlens")) {  // Megatron's: the sample, not its padding
        const auto* lengths = static_cast<const std::int32_t*>(batch->data(*real));
        end = begin + (lengths[s + 1] - lengths[s]);
      }
    }
    std::printf("\n--- %s ---\n", batch->sample_ids[s].c_str());
    // Whether token j is trained: its label, or in Megatron's rows (labels shifted to the next
    // token) the label before it.
    const bool shifted = batch->find("cu_seqlens") != nullptr;
    auto is_trained = [&](std::int64_t j) { return shifted ? j > begin && labels[j - 1] != -100 : labels[j] != -100; };
    std::int64_t j = begin;
    while (j < end) {
      if (!cu_t && ids[j] == 151643 && labels[j] == -100) break;  // padding
      const bool trained = is_trained(j);
      std::string piece;
      std::vector<std::int32_t> run;
      std::int64_t pad = -1, pads = 0;  // a run of one pad token, collapsed to "<|..._pad|>xN"
      auto flush_pads = [&] {
        if (pads == 0) return;
        piece += tok->decode(run) + (pad == image_pad ? "<|image_pad|>x" : "<|video_pad|>x") + std::to_string(pads);
        run.clear();
        pads = 0;
      };
      while (j < end && is_trained(j) == trained) {
        if (ids[j] == image_pad || ids[j] == video_pad) {
          if (ids[j] != pad) flush_pads();
          pad = ids[j];
          ++pads;
        } else {
          flush_pads();
          run.push_back(static_cast<std::int32_t>(ids[j]));
        }
        ++j;
      }
      flush_pads();
      piece += tok->decode(run);
      std::printf(trained ? "%s%s%s" : "%.0s%s%.0s", on, piece.c_str(), off);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace mmfeed::tools
