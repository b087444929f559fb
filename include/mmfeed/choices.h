// The vocabulary every layer shares: one medium's grid (GridThw), and the fixed choices that more
// than one layer takes, one enum each with the names Python, the CLI
// and config files give it (Choices<E>): the Loader (LoaderConfig), the one-call APIs
// (mmfeed::ImageProcessor, AudioProcessor, encode_conversation) and the engine's vision, audio
// and text code all use these, never copies. The Loader's own choices (Mode, OnError, ...) sit in
// loader.h beside LoaderConfig, with their names.
//
// Example:
//   parse_choice<ResizeFilter>("bicubic-torch")  // ResizeFilter::kBicubicTorch
//   choice_name(Pixels::kBFloat16)                // "bfloat16"
//   choice_list<Truncation>()                     // "error or truncate"
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mmfeed {

// The names of a fixed choice, in the order of its enum's values.
template <class E>
struct Choices;

// The name of a choice ("pad"), and the choice of a name (nullopt: not one of them).
template <class E>
std::string_view choice_name(E value) {
  return Choices<E>::names[static_cast<std::size_t>(value)];
}
template <class E>
std::optional<E> parse_choice(std::string_view name) {
  for (std::size_t i = 0; i < Choices<E>::names.size(); ++i) {
    if (Choices<E>::names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}
// "pad, drop or keep".
template <class E>
std::string choice_list() {
  std::string out;
  const auto& names = Choices<E>::names;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

// One medium's grid: its image_grid_thw or video_grid_thw row (temporal, height, width patches).
using GridThw = std::array<std::int64_t, 3>;

// ---- Images and videos

// What an image's alpha channel (or PNG transparency) becomes:
//   kDrop       Pillow's convert("RGB"): alpha discarded, as transformers' load_image, LLaMA-Factory
//               and Qwen's fine-tuning scripts read an image from a path or URL;
//   kPaste      qwen-vl-utils' to_rgb: an RGBA image pasted on white through its alpha;
//   kComposite  transformers' processor given a PIL image (what `datasets` hands it):
//               Image.alpha_composite over opaque white ("white").
enum class AlphaPolicy { kDrop, kPaste, kComposite };
template <>
struct Choices<AlphaPolicy> {
  static constexpr std::array<std::string_view, 3> names{"drop", "paste", "white"};
};

// pixel_values' (and pixel_values_videos') element type: HF's float32; bfloat16 (those values
// rounded to nearest even, what a bf16 model computes with); or uint8, the resized pixels
// before normalization (images without the temporal repeat), a quarter (images: an eighth) of
// the bytes to hold, copy and send, for the trainer to normalize on its device
// (mmfeed.normalize_pixels gives the float32 or bfloat16 values exactly).
enum class Pixels { kFloat32, kBFloat16, kUInt8 };
template <>
struct Choices<Pixels> {
  static constexpr std::array<std::string_view, 3> names{"float32", "bfloat16", "uint8"};
};

// Which of transformers' Qwen-VL image processors images match, bit for bit: kPil,
// Qwen2VLImageProcessorPil (Pillow's bicubic; rescale, then normalize); kTorchvision,
// Qwen2VLImageProcessor, what transformers 5's AutoImageProcessor picks wherever torchvision is
// installed (torch's antialiased bicubic on uint8, rescale fused into normalize: up to ~0.04 apart
// from kPil). The video processors normalize as kTorchvision.
enum class ImageBackend { kPil, kTorchvision };
template <>
struct Choices<ImageBackend> {
  static constexpr std::array<std::string_view, 2> names{"pil", "torchvision"};
};

// Which resampling and patchify kernels run: the fastest the CPU has (auto, simd), the portable
// Highway kernels, or the scalar reference. All give the same bytes.
enum class ImageKernel { kAuto, kSimd, kPortable, kScalar };
template <>
struct Choices<ImageKernel> {
  static constexpr std::array<std::string_view, 4> names{"auto", "simd", "portable", "scalar"};
};

// Pillow's filters, and torch's antialiased bicubic on uint8 (torchvision's resize).
enum class ResizeFilter { kBicubic, kBicubicTorch, kBilinear, kLanczos, kBox, kHamming };
template <>
struct Choices<ResizeFilter> {
  static constexpr std::array<std::string_view, 6> names{"bicubic", "bicubic-torch", "bilinear",
                                                         "lanczos", "box",           "hamming"};
};

// ---- Audio

// How audio clips (the Omni models) are padded together in input_features (a batch's, or an
// AudioProcessor call's): kModel, as the model's processor pads them (Qwen2.5-Omni: every clip to
// its fixed 300 s, 30,000 frames, ~15 MB of float32 per clip, longer clips cut; Qwen3-Omni: to
// the longest clip); kMaxLength, to the model's fixed length; kLongest, to the longest clip. A
// clip's valid frames are the same either way except in Qwen3-Omni (whose reference pads to the
// longest); padding Qwen2.5-Omni's clips to the longest gives the fixed-length values with the
// frames past the longest clip left out (the model reads each clip's valid frames through
// feature_attention_mask).
enum class AudioPadding { kModel, kMaxLength, kLongest };
template <>
struct Choices<AudioPadding> {
  static constexpr std::array<std::string_view, 3> names{"model", "max_length", "longest"};
};

// ---- Text

// A sample longer than max_length: an error (the Loader skips it by on_error), or cut at
// max_length, never inside a media block (the cut moves before it).
enum class Truncation { kError, kTruncate };
template <>
struct Choices<Truncation> {
  static constexpr std::array<std::string_view, 2> names{"error", "truncate"};
};

// What is trained, for every template: the assistant turns only, as rendered after
// "<|im_start|>assistant\n": content, tool calls and (default, see train_reasoning) the <think>
// block the Thinking template renders, then the end marker: kQwen "<|im_end|>" + "\n" (Qwen's
// recipe, LLaMA-Factory's), kContentAndEos "<|im_end|>". Never system, user or tool turns: tool
// responses are inputs (Qwen3-VL renders them in a user turn).
enum class Labels { kQwen, kContentAndEos };
template <>
struct Choices<Labels> {
  static constexpr std::array<std::string_view, 2> names{"qwen", "content_and_eos"};
};

}  // namespace mmfeed
