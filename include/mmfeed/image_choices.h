// How images become pixel rows, the choices of the Loader (LoaderConfig), of mmfeed::ImageProcessor
// and of the vision code (src/vision/), one enum each.
//
// What an image's alpha channel (or PNG transparency) becomes (AlphaPolicy):
//   kDrop       Pillow's convert("RGB"): alpha discarded, as transformers' load_image, LLaMA-Factory
//               and Qwen's fine-tuning scripts read an image from a path or URL;
//   kPaste      qwen-vl-utils' to_rgb: an RGBA image pasted on white through its alpha;
//   kComposite  transformers' processor given a PIL image (what `datasets` hands it):
//               Image.alpha_composite over opaque white ("white").
#pragma once

namespace mmfeed {

enum class AlphaPolicy { kDrop, kPaste, kComposite };

// pixel_values' (and pixel_values_videos') element type: HF's float32; bfloat16 (those values
// rounded to nearest even, what a bf16 model computes with); or uint8, the resized pixels
// before normalization (images without the temporal repeat), a quarter (images: an eighth) of
// the bytes to hold, copy and send, for the trainer to normalize on its device
// (mmfeed.normalize_pixels gives the float32 or bfloat16 values exactly).
enum class Pixels { kFloat32, kBFloat16, kUInt8 };

}  // namespace mmfeed
