// How a conversation becomes a training sample, the choices of the Loader (LoaderConfig::truncation,
// ::labels), of mmfeed::encode_conversation (EncodeOptions) and of the text encoder
// (src/text/chat_encode.h), one enum each.
#pragma once

namespace mmfeed {

// A sample longer than max_length: an error (the Loader skips it by on_error), or cut at
// max_length, never inside a media block (the cut moves before it).
enum class Truncation { kError, kTruncate };

// What is trained, for every template: the assistant turns only, as rendered after
// "<|im_start|>assistant\n": content, tool calls and (default, see train_reasoning) the <think>
// block the Thinking template renders, then the end marker: kQwen "<|im_end|>" + "\n" (Qwen's
// recipe, LLaMA-Factory's), kContentAndEos "<|im_end|>". Never system, user or tool turns: tool
// responses are inputs (Qwen3-VL renders them in a user turn).
enum class Labels { kQwen, kContentAndEos };

}  // namespace mmfeed
