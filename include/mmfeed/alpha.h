// What an image's alpha channel (or PNG transparency) becomes, a choice of the Loader
// (LoaderConfig::alpha), of mmfeed::ImageProcessor and of the decoder (src/vision/decode.h):
//   kDrop       Pillow's convert("RGB"): alpha discarded, as transformers' load_image, LLaMA-Factory
//               and Qwen's fine-tuning scripts read an image from a path or URL;
//   kPaste      qwen-vl-utils' to_rgb: an RGBA image pasted on white through its alpha;
//   kComposite  transformers' processor given a PIL image (what `datasets` hands it):
//               Image.alpha_composite over opaque white ("white").
#pragma once

namespace mmfeed {

enum class AlphaPolicy { kDrop, kPaste, kComposite };

}  // namespace mmfeed
