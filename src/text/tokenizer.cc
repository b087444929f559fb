// The tokenizer.json BPE tokenizer: loading and checking the file, added tokens, NFC, the
// pre-tokenizer regex, byte-level BPE and decoding. Over 600 lines because all of them work on
// one Impl (vocabulary, merges, added-token matcher, compiled regex) that the loader fills and
// encode reads; splitting the loader from the encoder needs that Impl in an internal header, a
// step of issue 17 not yet taken.
#include "text/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <simdjson.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <unordered_map>

namespace mmfeed::text {

namespace {

Error unsupported(const std::string& what) {
  return Error(ErrorCode::kUnsupported, "tokenizer.json: " + what + " is not supported");
}

// GPT-2's byte-level alphabet: printable bytes stand for themselves, the others are shifted
// to code points from 256 up.
struct ByteLevelAlphabet {
  std::array<std::uint32_t, 256> byte_to_cp{};
  std::unordered_map<std::uint32_t, std::uint8_t> cp_to_byte;
  ByteLevelAlphabet() {
    std::uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      byte_to_cp[b] = printable ? static_cast<std::uint32_t>(b) : next++;
      cp_to_byte[byte_to_cp[b]] = static_cast<std::uint8_t>(b);
    }
  }
};

const ByteLevelAlphabet& alphabet() {
  static const ByteLevelAlphabet a;
  return a;
}

// A vocabulary key (byte-level characters) to the raw bytes it stands for.
std::optional<std::string> key_to_bytes(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(key.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(key.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) return std::nullopt;
    auto it = alphabet().cp_to_byte.find(static_cast<std::uint32_t>(cp));
    if (it == alphabet().cp_to_byte.end()) return std::nullopt;
    out += static_cast<char>(it->second);
    p += n;
    left -= n;
  }
  return out;
}

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

struct AddedToken {
  std::int32_t id;
  std::string content;
  bool special, lstrip, rstrip, single_word, normalized;
};

struct Match {
  std::size_t begin, end;  // including stripped whitespace
  const AddedToken* token;
};

// Leftmost-longest matching of added tokens in a text.
class AddedMatcher {
 public:
  void add(const AddedToken* t) {
    if (t->content.empty()) return;
    tokens_.push_back(t);
    first_byte_[static_cast<unsigned char>(t->content[0])] = true;
  }
  bool empty() const { return tokens_.empty(); }

  std::vector<Match> find_all(std::string_view text) const {
    std::vector<Match> out;
    std::size_t i = 0;
    while (i < text.size()) {
      if (!first_byte_[static_cast<unsigned char>(text[i])]) {
        ++i;
        continue;
      }
      const AddedToken* best = nullptr;
      for (const AddedToken* t : tokens_) {
        if (text.compare(i, t->content.size(), t->content) == 0 && (!best || t->content.size() > best->content.size()) &&
            word_ok(text, i, t)) {
          best = t;
        }
      }
      if (!best) {
        ++i;
        continue;
      }
      Match m{i, i + best->content.size(), best};
      if (best->lstrip) {
        const std::size_t floor = out.empty() ? 0 : out.back().end;
        while (m.begin > floor && is_whitespace_byte(text[m.begin - 1])) --m.begin;
      }
      if (best->rstrip) {
        while (m.end < text.size() && is_whitespace_byte(text[m.end])) ++m.end;
      }
      out.push_back(m);
      i = m.end;
    }
    return out;
  }

 private:
  static bool word_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x80 || std::isalnum(u) || c == '_';
  }
  static bool word_ok(std::string_view text, std::size_t at, const AddedToken* t) {
    if (!t->single_word) return true;
    const std::size_t end = at + t->content.size();
    return (at == 0 || !word_char(text[at - 1])) && (end >= text.size() || !word_char(text[end]));
  }

  std::vector<const AddedToken*> tokens_;
  std::array<bool, 256> first_byte_{};
};

constexpr std::size_t kCacheShards = 16;
constexpr std::size_t kCacheEntriesPerShard = 8192;

}  // namespace

struct Tokenizer::Impl {
  // Vocabulary in raw bytes.
  std::unordered_map<std::string, std::int32_t> vocab;
  std::vector<std::string> id_to_bytes;
  std::array<std::int32_t, 256> byte_id{};
  // (left id, right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;
  bool ignore_merges = false;
  bool nfc = false;
  // Added tokens.
  std::vector<AddedToken> added;
  std::unordered_map<std::int32_t, const AddedToken*> added_by_id;
  AddedMatcher raw_matcher;
  AddedMatcher normalized_matcher;
  // Pre-tokenizer.
  pcre2_code* regex = nullptr;
  std::string pattern;
  // Merged-piece cache.
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<std::int32_t>> map;
  };
  mutable std::array<Shard, kCacheShards> cache;

  ~Impl() {
    if (regex) pcre2_code_free(regex);
  }

  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }

  // BPE of one pre-token (raw bytes): lowest rank first, leftmost among equal ranks.
  void bpe(std::string_view piece, std::vector<std::int32_t>& out) const {
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
    Shard& shard = cache[std::hash<std::string_view>()(piece) % kCacheShards];
    {
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
    std::lock_guard lock(shard.mu);
    if (shard.map.size() < kCacheEntriesPerShard) shard.map.emplace(std::string(piece), std::move(result));
  }

  // Splits `text` (normalized) into pre-tokens: regex matches, and the gaps between them.
  void pre_tokenize(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& pieces) const {
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
    std::size_t last_end = 0;
    while (start <= text.size()) {
      int rc = pcre2_match(regex, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md, mctx);
      if (rc < 0) break;  // no more matches (or a resource limit: the rest becomes one piece)
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const std::size_t b = ov[0], e = ov[1];
      if (b > last_end) pieces.emplace_back(last_end, b);
      if (e > b) {
        pieces.emplace_back(b, e);
        last_end = e;
        start = e;
      } else {
        // An empty match: step over one character.
        start = e + 1;
        while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
      }
    }
    if (last_end < text.size()) pieces.emplace_back(last_end, text.size());
  }

  // NFC of `run` by utf8proc, which (2.8) wrongly joins U+11A7 to a preceding Hangul syllable
  // without a final consonant, deleting it; U+11A7 is a starter nothing composes with (it is
  // the T jamo one before the composing range), so composing the text before each one apart
  // from the rest is exact.
  static std::string compose(std::string_view run) {
    std::string out;
    constexpr std::string_view kJamo11A7 = "\xE1\x86\xA7";
    while (!run.empty()) {
      std::size_t cut = run.find(kJamo11A7, 1);
      if (cut == std::string_view::npos) cut = run.size();
      const std::string_view piece = run.substr(0, cut);
      utf8proc_uint8_t* composed = nullptr;
      const utf8proc_ssize_t len =
          utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(piece.data()), static_cast<utf8proc_ssize_t>(piece.size()),
                       &composed, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
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

  // Tokenizes a segment that holds no added tokens; offsets relative to `base` in the input.
  void encode_plain(std::string_view segment, std::size_t base, Encoding& enc) const {
    if (segment.empty()) return;
    // NFC, distributed over runs that start at ASCII characters (a canonical composition never
    // takes an ASCII character as its second part, nor reorders across one), so that each
    // token's offset maps back into the original text.
    std::string normalized;
    struct Run {
      std::size_t norm_begin, orig_begin;
      bool changed;
      bool lead_kept = false;  // changed, but its leading ASCII character came through as itself
    };
    std::vector<Run> runs;
    std::string_view text = segment;
    bool any_non_ascii = false;
    for (char c : segment) any_non_ascii |= static_cast<unsigned char>(c) >= 0x80;
    if (nfc && any_non_ascii) {
      std::size_t i = 0;
      while (i < segment.size()) {
        std::size_t j = i + 1;
        while (j < segment.size() && static_cast<unsigned char>(segment[j]) >= 0x80) ++j;
        const std::string_view run = segment.substr(i, j - i);
        bool simple = true;  // only code points below U+0300 are NFC-stable without a lookup
        for (std::size_t k = 0; k < run.size(); ++k) {
          const auto u = static_cast<unsigned char>(run[k]);
          if (u >= 0xCC) simple = false;  // lead bytes of U+0300 and above
        }
        Run r{normalized.size(), i, false};
        if (simple) {
          normalized.append(run);
        } else {
          const std::string composed = compose(run);
          r.changed = composed != run;
          // A composition with an ASCII base yields a non-ASCII character: an ASCII first byte
          // out means the lead character was left alone, and the change lies after it.
          r.lead_kept = r.changed && static_cast<unsigned char>(run[0]) < 0x80 && !composed.empty() &&
                        composed[0] == run[0];
          normalized.append(composed);
        }
        runs.push_back(r);
        i = j;
      }
      text = normalized;
    }
    auto original_offset = [&](std::size_t norm) -> std::size_t {
      if (runs.empty()) return base + norm;
      auto it = std::upper_bound(runs.begin(), runs.end(), norm,
                                 [](std::size_t v, const Run& r) { return v < r.norm_begin; });
      const Run& r = *std::prev(it);
      if (!r.changed) return base + r.orig_begin + (norm - r.norm_begin);
      // Inside a changed run positions map to its start, or to just after a lead character that
      // NFC kept (so a token starting an assistant reply after the header's "\n" maps into the
      // reply, and is trained).
      return base + r.orig_begin + (r.lead_kept && norm > r.norm_begin ? 1 : 0);
    };
    std::vector<std::pair<std::size_t, std::size_t>> pieces;
    pre_tokenize(text, pieces);
    std::vector<std::int32_t> ids;
    for (const auto& [b, e] : pieces) {
      ids.clear();
      bpe(text.substr(b, e - b), ids);
      // Offsets of the tokens inside the piece, by their byte lengths.
      std::size_t at = b;
      for (std::int32_t id : ids) {
        const std::size_t len = id_to_bytes[id].size();
        enc.ids.push_back(id);
        enc.offsets.emplace_back(static_cast<std::uint32_t>(original_offset(at)),
                                 static_cast<std::uint32_t>(original_offset(std::min(at + len, e) - 1) + 1));
        at += len;
      }
    }
  }

  void encode_normalized_segment(std::string_view segment, std::size_t base, Encoding& enc) const {
    if (normalized_matcher.empty()) {
      encode_plain(segment, base, enc);
      return;
    }
    // Tokens marked normalized=true are matched in normalized text; for NFC this equals
    // matching them in the raw text except around composed characters, which added tokens
    // (ASCII markup) never are.
    std::size_t at = 0;
    for (const Match& m : normalized_matcher.find_all(segment)) {
      encode_plain(segment.substr(at, m.begin - at), base + at, enc);
      enc.ids.push_back(m.token->id);
      enc.offsets.emplace_back(static_cast<std::uint32_t>(base + m.begin), static_cast<std::uint32_t>(base + m.end));
      at = m.end;
    }
    encode_plain(segment.substr(at), base + at, enc);
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_file(const std::string& path) {
  // Checked before opening: a FIFO would block the open forever, a huge file take its size.
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{256} << 20;  // Qwen's is 11 MB
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    return Error(ErrorCode::kUnsupported, "tokenizer file is not a regular file", path);
  }
  if (const std::uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > kMaxBytes) {
    return Error(ErrorCode::kResourceExhausted,
                 "tokenizer file of " + std::to_string(size) + " bytes, more than " + std::to_string(kMaxBytes), path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::kNotFound, "cannot open tokenizer file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = from_json(ss.str());
  if (!t.ok()) return std::move(t).error().with_context(path);
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error(ErrorCode::kCorruptData, std::string("tokenizer.json does not parse: ") + simdjson::error_message(err));
  }
  auto impl = std::make_unique<Impl>();

  // Model: byte-level BPE only.
  simdjson::dom::object model;
  if (doc["model"].get_object().get(model)) return Error(ErrorCode::kCorruptData, "tokenizer.json has no model");
  std::string_view type;
  if (model["type"].get_string().get(type) || type != "BPE") {
    return unsupported("model type '" + std::string(type) + "' (only BPE)");
  }
  bool flag = false;
  if (!model["byte_fallback"].get_bool().get(flag) && flag) return unsupported("BPE byte_fallback");
  double dropout = 0;
  if (!model["dropout"].get_double().get(dropout) && dropout > 0) return unsupported("BPE dropout");
  std::string_view affix;
  if (!model["continuing_subword_prefix"].get_string().get(affix) && !affix.empty()) {
    return unsupported("BPE continuing_subword_prefix");
  }
  if (!model["end_of_word_suffix"].get_string().get(affix) && !affix.empty()) return unsupported("BPE end_of_word_suffix");
  if (!model["ignore_merges"].get_bool().get(flag)) impl->ignore_merges = flag;

  simdjson::dom::object vocab;
  if (model["vocab"].get_object().get(vocab)) return Error(ErrorCode::kCorruptData, "tokenizer.json: model.vocab missing");
  std::int32_t max_id = -1;
  for (auto [key, value] : vocab) {
    int64_t id = 0;
    if (value.get_int64().get(id)) return Error(ErrorCode::kCorruptData, "tokenizer.json: vocab id is not an integer");
    auto bytes = key_to_bytes(key);
    if (!bytes) return unsupported("a vocabulary entry outside the byte-level alphabet ('" + std::string(key) + "')");
    impl->vocab.emplace(*bytes, static_cast<std::int32_t>(id));
    max_id = std::max<std::int32_t>(max_id, static_cast<std::int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = impl->vocab.find(std::string(1, static_cast<char>(b)));
    if (it == impl->vocab.end()) return unsupported("a vocabulary without every single byte");
    impl->byte_id[b] = it->second;
  }

  simdjson::dom::array merges;
  if (model["merges"].get_array().get(merges)) return Error(ErrorCode::kCorruptData, "tokenizer.json: model.merges missing");
  impl->merges.reserve(merges.size() * 2);
  std::int32_t rank = 0;
  for (simdjson::dom::element m : merges) {
    std::string left, right;
    std::string_view s;
    simdjson::dom::array pair;
    if (!m.get_string().get(s)) {  // "a b"
      const auto sp = s.find(' ');
      if (sp == std::string_view::npos) return Error(ErrorCode::kCorruptData, "tokenizer.json: malformed merge");
      left = std::string(s.substr(0, sp));
      right = std::string(s.substr(sp + 1));
    } else if (!m.get_array().get(pair) && pair.size() == 2) {  // ["a", "b"]
      left = std::string(std::string_view(pair.at(0)));
      right = std::string(std::string_view(pair.at(1)));
    } else {
      return Error(ErrorCode::kCorruptData, "tokenizer.json: malformed merge");
    }
    auto lb = key_to_bytes(left), rb = key_to_bytes(right);
    if (!lb || !rb) return unsupported("a merge outside the byte-level alphabet");
    auto li = impl->vocab.find(*lb), ri = impl->vocab.find(*rb), mi = impl->vocab.find(*lb + *rb);
    if (li == impl->vocab.end() || ri == impl->vocab.end() || mi == impl->vocab.end()) {
      return Error(ErrorCode::kCorruptData, "tokenizer.json: merge of tokens missing from the vocabulary");
    }
    impl->merges.emplace(Impl::pair_key(li->second, ri->second), std::make_pair(rank++, mi->second));
  }

  // Normalizer: none or NFC.
  simdjson::dom::element normalizer = doc["normalizer"];
  if (!normalizer.is_null()) {
    std::string_view ntype;
    if (normalizer["type"].get_string().get(ntype) || ntype != "NFC") {
      return unsupported("normalizer '" + std::string(ntype) + "' (only NFC)");
    }
    impl->nfc = true;
  }

  // Pre-tokenizer: Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)] or
  // ByteLevel(use_regex=true), the GPT-2 pattern.
  std::string pattern;
  auto byte_level_ok = [](simdjson::dom::element e, bool* use_regex) -> Status {
    bool prefix = false;
    if (!e["add_prefix_space"].get_bool().get(prefix) && prefix) return unsupported("ByteLevel add_prefix_space");
    *use_regex = true;
    bool r = true;
    if (!e["use_regex"].get_bool().get(r)) *use_regex = r;
    return ok_status();
  };
  simdjson::dom::element pre = doc["pre_tokenizer"];
  std::string_view ptype;
  if (pre.is_null() || pre["type"].get_string().get(ptype)) return unsupported("a missing pre_tokenizer");
  std::vector<simdjson::dom::element> steps;
  if (ptype == "Sequence") {
    for (simdjson::dom::element e : pre["pretokenizers"].get_array()) steps.push_back(e);
  } else {
    steps.push_back(pre);
  }
  bool saw_byte_level = false;
  for (simdjson::dom::element e : steps) {
    std::string_view t;
    (void)e["type"].get_string().get(t);
    if (t == "Split") {
      std::string_view behavior, regex;
      bool invert = false;
      (void)e["behavior"].get_string().get(behavior);
      if (!e["invert"].get_bool().get(invert) && invert) return unsupported("Split invert");
      if (behavior != "Isolated") return unsupported("Split behavior '" + std::string(behavior) + "'");
      if (e["pattern"]["Regex"].get_string().get(regex)) return unsupported("a Split pattern that is not a Regex");
      if (!pattern.empty()) return unsupported("more than one Split");
      pattern = std::string(regex);
    } else if (t == "ByteLevel") {
      bool use_regex = true;
      MMFEED_RETURN_IF_ERROR(byte_level_ok(e, &use_regex));
      if (use_regex) {
        if (!pattern.empty()) return unsupported("a Split followed by ByteLevel(use_regex=true)");
        pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
      }
      saw_byte_level = true;
    } else {
      return unsupported("pre_tokenizer '" + std::string(t) + "'");
    }
  }
  if (!saw_byte_level || pattern.empty()) return unsupported("a pre_tokenizer without ByteLevel and a split pattern");

  // Post-processor: ByteLevel (no effect on ids) or none. Decoder: ByteLevel or none.
  simdjson::dom::element post = doc["post_processor"];
  std::string_view post_type;
  if (!post.is_null() && (post["type"].get_string().get(post_type) || post_type != "ByteLevel")) {
    return unsupported("post_processor '" + std::string(post_type) + "' (it would add tokens)");
  }
  simdjson::dom::element dec = doc["decoder"];
  std::string_view dec_type;
  if (!dec.is_null() && (dec["type"].get_string().get(dec_type) || dec_type != "ByteLevel")) {
    return unsupported("decoder '" + std::string(dec_type) + "'");
  }

  int errcode = 0;
  PCRE2_SIZE erroff = 0;
  impl->regex = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                              &errcode, &erroff, nullptr);
  if (impl->regex == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(errcode, msg, sizeof msg);
    return unsupported("pre-tokenizer regex (PCRE2: " + std::string(reinterpret_cast<char*>(msg)) + " at " +
                       std::to_string(erroff) + ")");
  }
  pcre2_jit_compile(impl->regex, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  impl->pattern = pattern;

  // Added tokens.
  simdjson::dom::array added;
  if (!doc["added_tokens"].get_array().get(added)) {
    impl->added.reserve(added.size());
    for (simdjson::dom::element a : added) {
      AddedToken t{};
      int64_t id = 0;
      std::string_view content;
      if (a["id"].get_int64().get(id) || a["content"].get_string().get(content)) {
        return Error(ErrorCode::kCorruptData, "tokenizer.json: malformed added token");
      }
      t.id = static_cast<std::int32_t>(id);
      t.content = std::string(content);
      (void)a["special"].get_bool().get(t.special);
      (void)a["lstrip"].get_bool().get(t.lstrip);
      (void)a["rstrip"].get_bool().get(t.rstrip);
      (void)a["single_word"].get_bool().get(t.single_word);
      (void)a["normalized"].get_bool().get(t.normalized);
      impl->added.push_back(std::move(t));
      max_id = std::max(max_id, impl->added.back().id);
    }
    for (const AddedToken& t : impl->added) {
      impl->added_by_id[t.id] = &t;
      (t.normalized ? impl->normalized_matcher : impl->raw_matcher).add(&t);
    }
  }
  impl->id_to_bytes.resize(static_cast<std::size_t>(max_id) + 1);
  for (const auto& [bytes, id] : impl->vocab) impl->id_to_bytes[id] = bytes;
  for (const AddedToken& t : impl->added) impl->id_to_bytes[t.id] = t.content;
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<Encoding> Tokenizer::encode_with_offsets(std::string_view text) const {
  if (!valid_utf8(text)) return Error(ErrorCode::kInvalidArgument, "text is not valid UTF-8");
  Encoding enc;
  enc.ids.reserve(text.size() / 3 + 4);
  enc.offsets.reserve(text.size() / 3 + 4);
  std::size_t at = 0;
  for (const Match& m : impl_->raw_matcher.find_all(text)) {
    impl_->encode_normalized_segment(text.substr(at, m.begin - at), at, enc);
    enc.ids.push_back(m.token->id);
    enc.offsets.emplace_back(static_cast<std::uint32_t>(m.begin), static_cast<std::uint32_t>(m.end));
    at = m.end;
  }
  impl_->encode_normalized_segment(text.substr(at), at, enc);
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
  for (const AddedToken& t : impl_->added) {
    if (t.content == token) return t.id;
  }
  // Vocabulary keys are given in the byte-level alphabet.
  if (auto bytes = key_to_bytes(token)) {
    if (auto it = impl_->vocab.find(*bytes); it != impl_->vocab.end()) return it->second;
  }
  return std::nullopt;
}

std::size_t Tokenizer::vocab_size() const { return impl_->vocab.size() + impl_->added.size(); }

}  // namespace mmfeed::text
