// The tables a Tokenizer works from, shared by its two halves and by nothing else: the loader
// (tokenizer_json.cc: tokenizer.json -> these tables, checked) fills them once, the encoder
// (tokenizer.cc: text -> ids, and decoding) reads them. Internal: text/tokenizer.h names
// Tokenizer::Impl but does not include this header.
//
// Threads: the loader runs on one thread, before the Tokenizer is shared; then any number of
// threads call the encoder at once. Everything in Impl is written only by the loader, except two
// things encoding writes, both safe to share: the merged-piece cache (`cache`: kCacheShards
// maps, each touched only under its shard's mutex, so workers encoding different pieces rarely
// wait on each other), and PCRE2's match data and JIT stack, which cannot be shared and so are
// per thread (a thread_local in Impl::pre_tokenize). The compiled regex is only read, which
// PCRE2 allows from many threads at once.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/tokenizer.h"

namespace mmfeed::text {

namespace detail {

// A vocabulary key (GPT-2's byte-level alphabet: printable bytes as themselves, the others
// shifted to code points from 256 up) to the raw bytes it stands for; nullopt for a key outside
// that alphabet. Used by the loader on every key and merge, and by token_to_id.
std::optional<std::string> key_to_bytes(std::string_view key);

struct AddedToken {
  std::int32_t id;
  std::string content;
  bool special, lstrip, rstrip, single_word, normalized;
};

struct AddedMatch {
  std::size_t begin, end;  // including stripped whitespace
  const AddedToken* token;
};

// Leftmost-longest matching of added tokens in a text, honouring lstrip, rstrip and
// single_word. Filled by the loader (add), then only read (find_next).
class AddedMatcher {
 public:
  // `t` must outlive the matcher (it points into Impl::added, which is not resized after).
  void add(const AddedToken* t) {
    if (t->content.empty()) return;
    tokens_.push_back(t);
    first_byte_[static_cast<unsigned char>(t->content[0])] = true;
  }
  bool empty() const { return tokens_.empty(); }

  // The first match in `text` at or after `from`, its lstrip taking whitespace back to `from`
  // at most. Called from 0, then from each match's end, it yields the matches in order, not
  // overlapping, one at a time (a text of many added tokens needs no list of them).
  std::optional<AddedMatch> find_next(std::string_view text, std::size_t from) const;

 private:
  static bool word_ok(std::string_view text, std::size_t at, const AddedToken* t);

  std::vector<const AddedToken*> tokens_;
  std::array<bool, 256> first_byte_{};
};

inline constexpr std::size_t kCacheShards = 16;
inline constexpr std::size_t kCacheEntriesPerShard = 8192;
// Longer pieces are merged every time, not cached (as `tokenizers`' BPE cache, which keeps
// words under 256 bytes): a run of letters of megabytes would otherwise stay in the cache, key
// and ids, for the tokenizer's life (issue 31).
inline constexpr std::size_t kCacheMaxPieceBytes = 256;

}  // namespace detail

struct Tokenizer::Impl {
  // Written by the loader only.
  // Vocabulary in raw bytes.
  std::unordered_map<std::string, std::int32_t> vocab;
  std::vector<std::string> id_to_bytes;
  std::array<std::int32_t, 256> byte_id{};
  // (left id, right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;
  bool ignore_merges = false;
  // The normalizer: none, NFC or NFKC (the only ones the Qwen-family files use).
  enum class Normalizer { kNone, kNfc, kNfkc };
  Normalizer normalizer = Normalizer::kNone;
  // Added tokens; the matchers and added_by_id point into `added`.
  std::vector<detail::AddedToken> added;
  std::unordered_map<std::int32_t, const detail::AddedToken*> added_by_id;
  detail::AddedMatcher raw_matcher;
  detail::AddedMatcher normalized_matcher;
  // Pre-tokenizer: compiled once (JIT where available), then matched from any thread.
  pcre2_code* regex = nullptr;
  std::string pattern;

  // Written by encoding threads: merged pieces, each shard under its own mutex.
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<std::int32_t>> map;
  };
  mutable std::array<Shard, detail::kCacheShards> cache;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (regex) pcre2_code_free(regex);
  }

  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }

  // The encoder (tokenizer.cc); all callable from any thread at once.

  // Where tokens go (Tokenizer::encode_each): false stops encoding.
  using Sink = std::function<bool(const Token&)>;

  // BPE of one pre-token (raw bytes): lowest rank first, leftmost among equal ranks.
  void bpe(std::string_view piece, std::vector<std::int32_t>& out) const;
  // Splits `text` (normalized) into pre-tokens, as `tokenizers`' Split(Isolated) does: regex
  // matches and the gaps between them, in order, each handed to `piece` (false stops).
  bool pre_tokenize(std::string_view text, const std::function<bool(std::size_t, std::size_t)>& piece) const;
  // Tokenizes a segment that holds no added tokens; offsets relative to `base` in the input.
  // These return false when the sink stopped them.
  bool encode_plain(std::string_view segment, std::size_t base, const Sink& sink) const;
  // Tokenizes a segment free of raw (normalized=false) added tokens: splits out the
  // normalized=true ones, encodes the rest with encode_plain.
  bool encode_normalized_segment(std::string_view segment, std::size_t base, const Sink& sink) const;
};

}  // namespace mmfeed::text
