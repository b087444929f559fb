// Encoding with the tables tokenizer_json.cc loaded (tokenizer_impl.h): added tokens split out,
// NFC by runs (offsets kept), the pre-tokenizer regex, byte-level BPE with its sharded cache;
// and decoding. Every function here is const on the tables and safe from many threads at once.
#include "text/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <queue>

#include "text/tokenizer_impl.h"

namespace mmfeed::text {

namespace {

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    if (*p < 0x80) {
      ++p;
      --left;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) return false;
    p += n;
    left -= n;
  }
  return true;
}

bool is_whitespace_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

bool word_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || std::isalnum(u) || c == '_';
}

// NFC (NFKC with `compat`) of `run` by utf8proc, which (2.8) wrongly joins U+11A7 to a
// preceding Hangul syllable without a final consonant, deleting it; U+11A7 is a starter nothing
// composes with (it is the T jamo one before the composing range), so composing the text before
// each one apart from the rest is exact.
std::string compose(std::string_view run, bool compat) {
  std::string out;
  constexpr std::string_view kJamo11A7 = "\xE1\x86\xA7";
  while (!run.empty()) {
    std::size_t cut = run.find(kJamo11A7, 1);
    if (cut == std::string_view::npos) cut = run.size();
    const std::string_view piece = run.substr(0, cut);
    utf8proc_uint8_t* composed = nullptr;
    const utf8proc_ssize_t len = utf8proc_map(
        reinterpret_cast<const utf8proc_uint8_t*>(piece.data()), static_cast<utf8proc_ssize_t>(piece.size()), &composed,
        static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | (compat ? UTF8PROC_COMPAT : 0)));
    if (len >= 0) {
      out.append(reinterpret_cast<const char*>(composed), static_cast<std::size_t>(len));
    } else {
      out.append(piece);
    }
    std::free(composed);
    run.remove_prefix(cut);
  }
  return out;
}

}  // namespace

namespace detail {

std::optional<AddedMatch> AddedMatcher::find_next(std::string_view text, std::size_t from) const {
  for (std::size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
    const AddedToken* best = nullptr;
    for (const AddedToken* t : tokens_) {
      if (text.compare(i, t->content.size(), t->content) == 0 && (!best || t->content.size() > best->content.size()) &&
          word_ok(text, i, t)) {
        best = t;
      }
    }
    if (!best) continue;
    AddedMatch m{i, i + best->content.size(), best};
    if (best->lstrip) {
      while (m.begin > from && is_whitespace_byte(text[m.begin - 1])) --m.begin;
    }
    if (best->rstrip) {
      while (m.end < text.size() && is_whitespace_byte(text[m.end])) ++m.end;
    }
    return m;
  }
  return std::nullopt;
}

bool AddedMatcher::word_ok(std::string_view text, std::size_t at, const AddedToken* t) {
  if (!t->single_word) return true;
  const std::size_t end = at + t->content.size();
  return (at == 0 || !word_char(text[at - 1])) && (end >= text.size() || !word_char(text[end]));
}

}  // namespace detail

void Tokenizer::Impl::bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
  if (ignore_merges) {
    if (auto it = vocab.find(std::string(piece)); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const std::size_t n = piece.size();
  if (n == 1) {
    out.push_back(byte_id[static_cast<unsigned char>(piece[0])]);
    return;
  }
  const bool cached = n < detail::kCacheMaxPieceBytes;
  Shard& shard = cache[std::hash<std::string_view>()(piece) % detail::kCacheShards];
  if (cached) {
    std::lock_guard lock(shard.mu);
    if (auto it = shard.map.find(std::string(piece)); it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::int32_t> id(n);
  std::vector<int> next(n), prev(n);
  std::vector<bool> alive(n, true);
  for (std::size_t i = 0; i < n; ++i) {
    id[i] = byte_id[static_cast<unsigned char>(piece[i])];
    next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
    prev[i] = static_cast<int>(i) - 1;
  }
  struct Candidate {
    std::int32_t rank;
    int pos;
    std::int32_t merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    if (auto it = merges.find(pair_key(id[left], id[next[left]])); it != merges.end()) {
      heap.push({it->second.first, left, it->second.second});
    }
  };
  for (std::size_t i = 0; i + 1 < n; ++i) push(static_cast<int>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (!alive[c.pos] || next[c.pos] < 0) continue;
    const int right = next[c.pos];
    auto it = merges.find(pair_key(id[c.pos], id[right]));
    if (it == merges.end() || it->second.second != c.merged) continue;
    id[c.pos] = c.merged;
    alive[right] = false;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  std::vector<std::int32_t> result;
  for (int i = 0; i >= 0; i = next[i]) result.push_back(id[i]);
  out.insert(out.end(), result.begin(), result.end());
  if (!cached) return;
  std::lock_guard lock(shard.mu);
  if (shard.map.size() < detail::kCacheEntriesPerShard) shard.map.emplace(std::string(piece), std::move(result));
}

bool Tokenizer::Impl::pre_tokenize(std::string_view text,
                                   const std::function<bool(std::size_t, std::size_t)>& piece) const {
  // Per-thread matching state, freed when the thread ends.
  struct MatchState {
    pcre2_match_data* md = pcre2_match_data_create(4, nullptr);
    pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    pcre2_match_context* mctx = pcre2_match_context_create(nullptr);
    MatchState() { pcre2_jit_stack_assign(mctx, nullptr, stack); }
    ~MatchState() {
      pcre2_match_context_free(mctx);
      pcre2_jit_stack_free(stack);
      pcre2_match_data_free(md);
    }
  };
  thread_local MatchState state;
  pcre2_match_data* md = state.md;
  pcre2_match_context* mctx = state.mctx;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  std::size_t last_end = 0;  // where the next piece begins
  while (start <= text.size()) {
    int rc = pcre2_match(regex, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, mctx);
    if (rc < 0) break;  // no more matches (or a resource limit: the rest becomes one piece)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const std::size_t b = ov[0], e = ov[1];
    if (b > last_end) {
      if (!piece(last_end, b)) return false;
      last_end = b;
    }
    if (e > b) {
      if (!piece(b, e)) return false;
      last_end = e;
      start = e;
    } else {
      // An empty match only splits the text there (issue 31: the gap before it was once handed
      // out again with every later piece). The search goes on from the next character, as
      // Oniguruma's find_iter in `tokenizers` does, which also skips an empty match right at a
      // match's end.
      start = e + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
  if (last_end < text.size()) return piece(last_end, text.size());
  return true;
}

bool Tokenizer::Impl::encode_plain(std::string_view segment, std::size_t base, const Sink& sink) const {
  if (segment.empty()) return true;
  // NFC or NFKC, distributed over runs that start at ASCII characters (both leave ASCII as it
  // is, and a composition never takes an ASCII character as its second part, nor reorders across
  // one), so that each token's offset maps back into the original text.
  std::string normalized;
  struct Run {  // offsets in 32 bits, as Token's
    std::uint32_t norm_begin, orig_begin;
    bool changed;
    bool lead_kept = false;  // changed, but its leading ASCII character came through as itself
  };
  std::vector<Run> runs;
  std::string_view text = segment;
  bool any_non_ascii = false;
  for (char c : segment) any_non_ascii |= static_cast<unsigned char>(c) >= 0x80;
  const bool compat = normalizer == Normalizer::kNfkc;
  if (normalizer != Normalizer::kNone && any_non_ascii) {
    std::size_t i = 0;
    while (i < segment.size()) {
      std::size_t j = i + 1;
      while (j < segment.size() && static_cast<unsigned char>(segment[j]) >= 0x80) ++j;
      const std::string_view run = segment.substr(i, j - i);
      // Only code points below U+0300 are NFC-stable without a lookup; NFKC changes some of
      // those too (U+00A0, U+00B2, ...).
      bool simple = !compat;
      for (std::size_t k = 0; simple && k < run.size(); ++k) {
        const auto u = static_cast<unsigned char>(run[k]);
        if (u >= 0xCC) simple = false;  // lead bytes of U+0300 and above
      }
      Run r{static_cast<std::uint32_t>(normalized.size()), static_cast<std::uint32_t>(i), false};
      if (simple) {
        normalized.append(run);
      } else {
        const std::string composed = compose(run, compat);
        r.changed = composed != run;
        // A composition with an ASCII base yields a non-ASCII character: an ASCII first byte
        // out means the lead character was left alone, and the change lies after it.
        r.lead_kept =
            r.changed && static_cast<unsigned char>(run[0]) < 0x80 && !composed.empty() && composed[0] == run[0];
        normalized.append(composed);
      }
      // An unchanged run after an unchanged one maps as its continuation: one entry for the
      // stretch, not one per ASCII character (issue 31: the table outgrew the text).
      if (r.changed || runs.empty() || runs.back().changed) runs.push_back(r);
      i = j;
    }
    text = normalized;
  }
  auto original_offset = [&](std::size_t norm) -> std::size_t {
    if (runs.empty()) return base + norm;
    auto it =
        std::upper_bound(runs.begin(), runs.end(), norm, [](std::size_t v, const Run& r) { return v < r.norm_begin; });
    const Run& r = *std::prev(it);
    if (!r.changed) return base + r.orig_begin + (norm - r.norm_begin);
    // Inside a changed run positions map to its start, or to just after a lead character that
    // NFC kept (so a token starting an assistant reply after the header's "\n" maps into the
    // reply, and is trained).
    return base + r.orig_begin + (r.lead_kept && norm > r.norm_begin ? 1 : 0);
  };
  std::vector<std::int32_t> ids;
  return pre_tokenize(text, [&](std::size_t b, std::size_t e) {
    ids.clear();
    bpe(text.substr(b, e - b), ids);
    // Offsets of the tokens inside the piece, by their byte lengths.
    std::size_t at = b;
    for (std::int32_t id : ids) {
      const std::size_t len = id_to_bytes[id].size();
      const Token token{id, static_cast<std::uint32_t>(original_offset(at)),
                        static_cast<std::uint32_t>(original_offset(std::min(at + len, e) - 1) + 1)};
      if (!sink(token)) return false;
      at += len;
    }
    return true;
  });
}

bool Tokenizer::Impl::encode_normalized_segment(std::string_view segment, std::size_t base, const Sink& sink) const {
  if (normalized_matcher.empty()) return encode_plain(segment, base, sink);
  // Tokens marked normalized=true are matched in normalized text; for NFC this equals
  // matching them in the raw text except around composed characters, which added tokens
  // (ASCII markup) never are.
  std::size_t at = 0;
  while (const std::optional<detail::AddedMatch> m = normalized_matcher.find_next(segment, at)) {
    if (!encode_plain(segment.substr(at, m->begin - at), base + at, sink)) return false;
    if (!sink({m->token->id, static_cast<std::uint32_t>(base + m->begin), static_cast<std::uint32_t>(base + m->end)})) {
      return false;
    }
    at = m->end;
  }
  return encode_plain(segment.substr(at), base + at, sink);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::encode_each(std::string_view text, const std::function<bool(const Token&)>& sink) const {
  if (!valid_utf8(text)) return Error(ErrorCode::kInvalidArgument, "text is not valid UTF-8");
  std::size_t at = 0;
  while (const std::optional<detail::AddedMatch> m = impl_->raw_matcher.find_next(text, at)) {
    if (!impl_->encode_normalized_segment(text.substr(at, m->begin - at), at, sink)) return ok_status();
    if (!sink({m->token->id, static_cast<std::uint32_t>(m->begin), static_cast<std::uint32_t>(m->end)})) {
      return ok_status();
    }
    at = m->end;
  }
  impl_->encode_normalized_segment(text.substr(at), at, sink);
  return ok_status();
}

Result<Encoding> Tokenizer::encode_with_offsets(std::string_view text) const {
  Encoding enc;
  enc.ids.reserve(text.size() / 3 + 4);
  enc.offsets.reserve(text.size() / 3 + 4);
  MMFEED_RETURN_IF_ERROR(encode_each(text, [&](const Token& t) {
    enc.ids.push_back(t.id);
    enc.offsets.emplace_back(t.begin, t.end);
    return true;
  }));
  return enc;
}

Result<std::vector<std::int32_t>> Tokenizer::encode(std::string_view text) const {
  MMFEED_ASSIGN_OR_RETURN(Encoding enc, encode_with_offsets(text));
  return std::move(enc.ids);
}

std::string Tokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_to_bytes.size()) continue;
    if (skip_special_tokens) {
      auto it = impl_->added_by_id.find(id);
      if (it != impl_->added_by_id.end() && it->second->special) continue;
    }
    bytes += impl_->id_to_bytes[id];
  }
  // Invalid sequences become U+FFFD, one per maximal invalid prefix, as String::from_utf8_lossy.
  std::string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(bytes.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = *p < 0x80 ? 1 : utf8proc_iterate(p, left, &cp);
    if (n > 0) {
      out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
      p += n;
      left -= n;
      continue;
    }
    // Skip the longest prefix of a valid sequence that got cut, then emit one replacement.
    utf8proc_ssize_t skip = 1;
    const int need = *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC0 ? 2 : 1;
    while (skip < need && skip < left && (p[skip] & 0xC0) == 0x80) ++skip;
    out += "\xEF\xBF\xBD";
    p += skip;
    left -= skip;
  }
  return out;
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const detail::AddedToken& t : impl_->added) {
    if (t.content == token) return t.id;
  }
  // Vocabulary keys are given in the byte-level alphabet.
  if (auto bytes = detail::key_to_bytes(token)) {
    if (auto it = impl_->vocab.find(*bytes); it != impl_->vocab.end()) return it->second;
  }
  return std::nullopt;
}

std::size_t Tokenizer::vocab_size() const { return impl_->vocab.size() + impl_->added.size(); }

}  // namespace mmfeed::text
