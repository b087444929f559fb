// A byte-level BPE tokenizer read from a Hugging Face tokenizer.json, producing the same ids
// as the `tokenizers` library for the files it accepts (the Qwen2/2.5/3 family, Llama-3-style
// files, GPT-2-style files) and refusing, with the feature named, the files it does not
// support - never silently different.
//
// Pipeline: added tokens split out of the raw text first (those marked normalized=false;
// lstrip/rstrip/single_word honoured) -> NFC (or NFKC) normalization (ASCII and other short-cut text
// skips utf8proc) -> the Split pre-tokenizer's regex (PCRE2, UTF + UCP, JIT) -> ByteLevel ->
// BPE merges by rank, with a cache of merged pieces. Loading is tokenizer_json.cc, encoding and
// decoding tokenizer.cc; the tables they share are in tokenizer_impl.h (internal).
//
// Threads: load on any thread; a loaded Tokenizer may then be used by any number of threads at
// once (the Loader's workers each encode with the same one). Its tables are read-only after
// loading; what encoding writes is the merged-piece cache, sharded and locked per shard, and
// PCRE2 match state, which is per thread. Destroy it only once no thread uses it.
//
// Example:
//   MMFEED_ASSIGN_OR_RETURN(auto tok, Tokenizer::from_file("tokenizer.json"));
//   std::vector<std::int32_t> ids = tok->encode("Hello, world");   // {9707, 11, 1879}
//   std::string text = tok->decode(ids);                            // "Hello, world"
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mmfeed/error.h"

namespace mmfeed::text {

// One token of an encoding: its id and the byte range [begin, end) of the input it covers
// (as Encoding::offsets).
struct Token {
  std::int32_t id;
  std::uint32_t begin, end;
};

struct Encoding {
  std::vector<std::int32_t> ids;
  // Byte range [begin, end) of each token in the input text (added tokens: their match,
  // stripped whitespace included; BPE tokens: the bytes they cover).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> offsets;
};

class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Parses a tokenizer.json. kUnsupported names any feature outside what is implemented
  // (another model type, byte fallback, dropout, a normalizer other than NFC or NFKC, ...).
  static Result<std::unique_ptr<Tokenizer>> from_json(std::string_view json);
  static Result<std::unique_ptr<Tokenizer>> from_file(const std::string& path);

  // kInvalidArgument on text that is not valid UTF-8. Thread-safe, as is everything below.
  Result<std::vector<std::int32_t>> encode(std::string_view text) const;
  Result<Encoding> encode_with_offsets(std::string_view text) const;

  // Hands the tokens of `text` to `sink` in order, as encode_with_offsets finds them, and stops
  // as soon as `sink` returns false: what it handed over is then a prefix of the encoding. It
  // holds no more than the pre-token being merged (and the normalized text of one stretch
  // between added tokens), so a caller that needs only the first tokens of a long text, as
  // encode_conversation under max_length, holds memory in proportion to those (issue 31).
  //
  // Example:
  //   std::vector<std::int32_t> first;  // the first 3 ids
  //   MMFEED_RETURN_IF_ERROR(tok->encode_each(text, [&](const Token& t) {
  //     first.push_back(t.id);
  //     return first.size() < 3;
  //   }));
  Status encode_each(std::string_view text, const std::function<bool(const Token&)>& sink) const;

  // Bytes of the tokens, concatenated; invalid UTF-8 replaced by U+FFFD as `tokenizers` does.
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = false) const;

  // The id of a vocabulary or added token, or nullopt.
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  std::size_t vocab_size() const;  // including added tokens

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mmfeed::text
