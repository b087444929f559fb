// Loading a Hugging Face tokenizer.json into the tables the encoder reads (tokenizer_impl.h):
// the byte-level BPE model (vocabulary, merges), the NFC or NFKC normalizer, the pre-tokenizer's split
// regex (compiled here), the added tokens; and refusing, by name, every feature outside them.
#include "text/tokenizer.h"

#include <simdjson.h>
#include <utf8proc.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "text/python_json.h"
#include "text/tokenizer_impl.h"

namespace mmfeed::text {

namespace {

Error unsupported(const std::string& what) {
  return Error(ErrorCode::kUnsupported, "tokenizer.json: " + what + " is not supported");
}

Error corrupt(const std::string& what) { return Error(ErrorCode::kCorruptData, "tokenizer.json: " + what); }

std::string kind(simdjson::dom::element e) { return std::string(json_kind(e)); }

// Token ids: `tokenizers` holds them as u32, the id -> token table here indexes by int32.
constexpr std::string_view kIdRange = "an integer from 0 to 2147483647";

// Token ids index the id -> token table (Impl::id_to_bytes), which the largest id sizes; so an
// id must also be below the number of tokens the file defines (vocabulary entries + added
// tokens) plus kIdSlack, checked before the table is allocated. Hugging Face files are dense
// (Qwen3: vocabulary ids 0..151642, its 26 added tokens right after, 151643..151668), but a file
// may leave holes, e.g. ids a model's embedding reserves that the file does not name. 2^16
// allows any such holes while bounding what one number in a file from outside can commit to
// 65536 empty slots (2 MiB), instead of 2^31 (64 GiB).
constexpr std::size_t kIdSlack = std::size_t{1} << 16;

// How many entries `c` (a dom::object or dom::array) holds; counted, since their size()
// saturates at 2^24 - 1.
template <typename Container>
std::size_t count_entries(Container c) {
  std::size_t n = 0;
  for ([[maybe_unused]] auto entry : c) ++n;
  return n;
}

// `e` as a token id; nullopt when it is not an integer in kIdRange.
std::optional<std::int32_t> read_id(simdjson::dom::element e) {
  std::int64_t id = 0;
  if (e.get_int64().get(id) || id < 0 || id > INT32_MAX) return std::nullopt;
  return static_cast<std::int32_t>(id);
}

// What a value read_id refused holds: "a string", or the integer itself ("-1").
std::string not_an_id(simdjson::dom::element e) {
  std::int64_t id = 0;
  return e.get_int64().get(id) ? kind(e) : std::to_string(id);
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

// An added token's flag: absent reads as false (files written before a flag existed lack it);
// present, it must be a boolean, as `tokenizers` requires.
Status read_flag(simdjson::dom::element token, std::string_view content, const char* key, bool* out) {
  const simdjson::error_code err = token[key].get_bool().get(*out);
  if (err == simdjson::SUCCESS || err == simdjson::NO_SUCH_FIELD) return ok_status();
  return Error(ErrorCode::kCorruptData, "tokenizer.json: malformed added token '" + std::string(content) + "': \"" +
                                            key + "\" is not a boolean");
}

}  // namespace

namespace detail {

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

}  // namespace detail

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

namespace {

// Ids are bounded by what the file defines before any is read, so that a hostile id cannot size
// the id table; max_id, of the ids checked against the bound, sizes it.
struct IdBound {
  std::size_t defined = 0;  // vocabulary entries and added tokens
  std::size_t bound = 0;    // defined + kIdSlack
  std::int32_t max_id = -1;

  Error beyond(const std::string& token, std::int32_t id) const {
    return corrupt(token + " has id " + std::to_string(id) + ", not below " + std::to_string(bound) + " (the " +
                   std::to_string(defined) + " tokens the file defines + " + std::to_string(kIdSlack) +
                   " for gaps in ids)");
  }
};

// The model's options: byte-level BPE only, without the variants we do not reproduce.
Status read_model_options(simdjson::dom::object model, Tokenizer::Impl* impl) {
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
  if (!model["end_of_word_suffix"].get_string().get(affix) && !affix.empty())
    return unsupported("BPE end_of_word_suffix");
  if (!model["ignore_merges"].get_bool().get(flag)) impl->ignore_merges = flag;
  return ok_status();
}

// model.vocab: every token's bytes and id, and every single byte among them.
Status read_vocab(simdjson::dom::object vocab, IdBound& ids, Tokenizer::Impl* impl) {
  for (auto [key, value] : vocab) {
    const std::optional<std::int32_t> id = read_id(value);
    if (!id) {
      return corrupt("model.vocab[\"" + std::string(key) + "\"] must be an id (" + std::string(kIdRange) + "), got " +
                     not_an_id(value));
    }
    if (static_cast<std::size_t>(*id) >= ids.bound) {
      return ids.beyond("model.vocab[\"" + std::string(key) + "\"]", *id);
    }
    auto bytes = detail::key_to_bytes(key);
    if (!bytes) return unsupported("a vocabulary entry outside the byte-level alphabet ('" + std::string(key) + "')");
    impl->vocab.emplace(*bytes, *id);
    ids.max_id = std::max(ids.max_id, *id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = impl->vocab.find(std::string(1, static_cast<char>(b)));
    if (it == impl->vocab.end()) return unsupported("a vocabulary without every single byte");
    impl->byte_id[b] = it->second;
  }
  return ok_status();
}

// model.merges, in rank order: "a b" or ["a", "b"], each of tokens in the vocabulary.
Status read_merges(simdjson::dom::object model, Tokenizer::Impl* impl) {
  simdjson::dom::element field;
  simdjson::dom::array merges;
  if (model["merges"].get(field)) return corrupt("model.merges is missing (expected a list of merges)");
  if (field.get_array().get(merges)) return corrupt("model.merges must be a list of merges, got " + kind(field));
  impl->merges.reserve(merges.size() * 2);
  std::int32_t rank = 0;
  for (simdjson::dom::element m : merges) {
    auto where = [&] { return "model.merges[" + std::to_string(rank) + "]"; };  // built only for an error
    std::string left, right;
    std::string_view s;
    simdjson::dom::array pair;
    if (!m.get_string().get(s)) {  // "a b"
      const auto sp = s.find(' ');
      if (sp == std::string_view::npos) {
        return corrupt(where() + " '" + std::string(s) + "' must be two tokens separated by a space");
      }
      left = std::string(s.substr(0, sp));
      right = std::string(s.substr(sp + 1));
    } else if (!m.get_array().get(pair)) {  // ["a", "b"]
      if (pair.size() != 2) {
        return corrupt(where() + R"( must be "left right" or ["left", "right"], got a list of )" +
                       std::to_string(pair.size()));
      }
      std::string* const sides[] = {&left, &right};
      std::size_t side = 0;
      for (simdjson::dom::element e : pair) {
        std::string_view token;
        if (e.get_string().get(token)) {
          return corrupt(where() + "[" + std::to_string(side) + "] must be a string (a token), got " + kind(e));
        }
        *sides[side++] = std::string(token);
      }
    } else {
      return corrupt(where() + R"( must be "left right" or ["left", "right"], got )" + kind(m));
    }
    auto lb = detail::key_to_bytes(left), rb = detail::key_to_bytes(right);
    if (!lb || !rb) return unsupported("a merge outside the byte-level alphabet");
    auto li = impl->vocab.find(*lb), ri = impl->vocab.find(*rb), mi = impl->vocab.find(*lb + *rb);
    if (li == impl->vocab.end() || ri == impl->vocab.end() || mi == impl->vocab.end()) {
      return Error(ErrorCode::kCorruptData, "tokenizer.json: merge of tokens missing from the vocabulary");
    }
    impl->merges.emplace(Tokenizer::Impl::pair_key(li->second, ri->second), std::make_pair(rank++, mi->second));
  }
  return ok_status();
}

// Normalizer: none (absent or null, as `tokenizers` reads it), NFC or NFKC.
Status read_normalizer(simdjson::dom::object root, Tokenizer::Impl* impl) {
  if (simdjson::dom::element normalizer; !root["normalizer"].get(normalizer) && !normalizer.is_null()) {
    if (!normalizer.is_object()) return corrupt(R"("normalizer" must be an object or null, got )" + kind(normalizer));
    std::string_view ntype;
    if (normalizer["type"].get_string().get(ntype) || (ntype != "NFC" && ntype != "NFKC")) {
      return unsupported("normalizer '" + std::string(ntype) + "' (only NFC and NFKC)");
    }
    impl->normalizer = ntype == "NFC" ? Tokenizer::Impl::Normalizer::kNfc : Tokenizer::Impl::Normalizer::kNfkc;
  }
  return ok_status();
}

// Pre-tokenizer: Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)] or
// ByteLevel(use_regex=true), the GPT-2 pattern. Returns the split pattern.
Result<std::string> read_pre_tokenizer(simdjson::dom::object root) {
  simdjson::dom::element field;
  std::optional<std::string> pattern;  // the empty pattern is one (it splits between characters)
  auto byte_level_ok = [](simdjson::dom::element e, bool* use_regex) -> Status {
    bool prefix = false;
    if (!e["add_prefix_space"].get_bool().get(prefix) && prefix) return unsupported("ByteLevel add_prefix_space");
    *use_regex = true;
    bool r = true;
    if (!e["use_regex"].get_bool().get(r)) *use_regex = r;
    return ok_status();
  };
  simdjson::dom::element pre;
  if (root["pre_tokenizer"].get(pre) || pre.is_null()) return unsupported("a missing pre_tokenizer");
  if (!pre.is_object()) return corrupt(R"("pre_tokenizer" must be an object, got )" + kind(pre));
  std::string_view ptype;
  if (pre["type"].get_string().get(ptype)) return unsupported("a missing pre_tokenizer");
  std::vector<simdjson::dom::element> steps;
  if (ptype == "Sequence") {
    simdjson::dom::array list;
    if (pre["pretokenizers"].get(field)) {
      return corrupt(R"(pre_tokenizer of type Sequence has no "pretokenizers" (expected a list of pre-tokenizers))");
    }
    if (field.get_array().get(list)) return corrupt("pre_tokenizer.pretokenizers must be a list, got " + kind(field));
    for (simdjson::dom::element e : list) steps.push_back(e);
  } else {
    steps.push_back(pre);
  }
  bool saw_byte_level = false;
  for (simdjson::dom::element e : steps) {
    std::string_view t;  // stays empty without a string "type": refused below as pre_tokenizer ''
    const bool has_type = !e["type"].get_string().get(t);
    if (has_type && t == "Split") {
      std::string_view behavior, regex;
      bool invert = false;
      const bool has_behavior = !e["behavior"].get_string().get(behavior);
      if (!e["invert"].get_bool().get(invert) && invert) return unsupported("Split invert");
      if (!has_behavior || behavior != "Isolated") return unsupported("Split behavior '" + std::string(behavior) + "'");
      if (e["pattern"]["Regex"].get_string().get(regex)) return unsupported("a Split pattern that is not a Regex");
      if (pattern) return unsupported("more than one Split");
      pattern = std::string(regex);
    } else if (has_type && t == "ByteLevel") {
      bool use_regex = true;
      MMFEED_RETURN_IF_ERROR(byte_level_ok(e, &use_regex));
      if (use_regex) {
        if (pattern) return unsupported("a Split followed by ByteLevel(use_regex=true)");
        pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
      }
      saw_byte_level = true;
    } else {
      return unsupported("pre_tokenizer '" + std::string(t) + "'");
    }
  }
  if (!saw_byte_level || !pattern) return unsupported("a pre_tokenizer without ByteLevel and a split pattern");
  return *pattern;
}

// Post-processor: ByteLevel (no effect on ids) or none. Decoder: ByteLevel or none. None is
// absent or null, as for the normalizer.
Status check_post_processing(simdjson::dom::object root) {
  simdjson::dom::element post;
  std::string_view post_type;
  if (!root["post_processor"].get(post) && !post.is_null() &&
      (post["type"].get_string().get(post_type) || post_type != "ByteLevel")) {
    return unsupported("post_processor '" + std::string(post_type) + "' (it would add tokens)");
  }
  simdjson::dom::element dec;
  std::string_view dec_type;
  if (!root["decoder"].get(dec) && !dec.is_null() &&
      (dec["type"].get_string().get(dec_type) || dec_type != "ByteLevel")) {
    return unsupported("decoder '" + std::string(dec_type) + "'");
  }
  return ok_status();
}

// The split pattern, compiled once (JIT where PCRE2 has it).
Status compile_pattern(const std::string& pattern, Tokenizer::Impl* impl) {
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
  return ok_status();
}

// Added tokens: none when absent; present, a list as `tokenizers` requires.
Status read_added_tokens(simdjson::dom::object root, IdBound& ids, Tokenizer::Impl* impl) {
  simdjson::dom::element field;
  if (!root["added_tokens"].get(field)) {
    simdjson::dom::array added;
    if (field.get_array().get(added)) return corrupt(R"("added_tokens" must be a list of tokens, got )" + kind(field));
    impl->added.reserve(added.size());
    std::size_t index = 0;
    for (simdjson::dom::element a : added) {
      const std::string where = "added_tokens[" + std::to_string(index++) + "]";
      if (!a.is_object()) return corrupt(where + R"( must be an object with "id" and "content", got )" + kind(a));
      detail::AddedToken t{};
      std::string_view content;
      if (a["content"].get_string().get(content)) return corrupt(where + R"( has no string "content")");
      simdjson::dom::element id_value;
      if (a["id"].get(id_value)) return corrupt("malformed added token '" + std::string(content) + R"(': no "id")");
      const std::optional<std::int32_t> id = read_id(id_value);
      if (!id) {
        return corrupt("malformed added token '" + std::string(content) + R"(': "id" must be )" +
                       std::string(kIdRange) + ", got " + not_an_id(id_value));
      }
      if (static_cast<std::size_t>(*id) >= ids.bound) {
        return ids.beyond("added token '" + std::string(content) + "'", *id);
      }
      t.id = *id;
      t.content = std::string(content);
      MMFEED_RETURN_IF_ERROR(read_flag(a, content, "special", &t.special));
      MMFEED_RETURN_IF_ERROR(read_flag(a, content, "lstrip", &t.lstrip));
      MMFEED_RETURN_IF_ERROR(read_flag(a, content, "rstrip", &t.rstrip));
      MMFEED_RETURN_IF_ERROR(read_flag(a, content, "single_word", &t.single_word));
      MMFEED_RETURN_IF_ERROR(read_flag(a, content, "normalized", &t.normalized));
      impl->added.push_back(std::move(t));
      ids.max_id = std::max(ids.max_id, impl->added.back().id);
    }
    for (const detail::AddedToken& t : impl->added) {
      // `tokenizers` finds these in the normalized text; NFKC can make one out of other
      // characters (fullwidth forms), which matching in the raw text would miss.
      if (t.normalized && impl->normalizer == Tokenizer::Impl::Normalizer::kNfkc) {
        return unsupported("added token '" + t.content + "' matched in NFKC-normalized text (normalized=true)");
      }
      impl->added_by_id[t.id] = &t;
      (t.normalized ? impl->normalized_matcher : impl->raw_matcher).add(&t);
    }
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc); err) {
    return Error(ErrorCode::kCorruptData,
                 std::string("tokenizer.json does not parse: ") + simdjson::error_message(err));
  }
  // Every member is read with simdjson's error codes: a field absent or of another type in a
  // file from outside is a kCorruptData naming it, never a simdjson_error thrown.
  simdjson::dom::object root;
  if (doc.get_object().get(root)) return corrupt("the document must be a JSON object, got " + kind(doc));
  auto impl = std::make_unique<Impl>();
  simdjson::dom::element field;
  simdjson::dom::object model;
  if (root["model"].get(field)) return corrupt(R"("model" is missing (expected an object with "type": "BPE"))");
  if (field.get_object().get(model)) {
    return corrupt(R"("model" must be an object with "type": "BPE", got )" + kind(field));
  }
  MMFEED_RETURN_IF_ERROR(read_model_options(model, impl.get()));
  simdjson::dom::object vocab;
  if (model["vocab"].get(field)) return corrupt("model.vocab is missing (expected an object of token -> id)");
  if (field.get_object().get(vocab)) return corrupt("model.vocab must be an object of token -> id, got " + kind(field));
  // "added_tokens" of another type counts none here and is refused by read_added_tokens.
  simdjson::dom::array added_list;
  IdBound ids;
  ids.defined =
      count_entries(vocab) + (root["added_tokens"].get_array().get(added_list) ? 0 : count_entries(added_list));
  ids.bound = ids.defined + kIdSlack;
  MMFEED_RETURN_IF_ERROR(read_vocab(vocab, ids, impl.get()));
  MMFEED_RETURN_IF_ERROR(read_merges(model, impl.get()));
  MMFEED_RETURN_IF_ERROR(read_normalizer(root, impl.get()));
  MMFEED_ASSIGN_OR_RETURN(const std::string pattern, read_pre_tokenizer(root));
  MMFEED_RETURN_IF_ERROR(check_post_processing(root));
  MMFEED_RETURN_IF_ERROR(compile_pattern(pattern, impl.get()));
  MMFEED_RETURN_IF_ERROR(read_added_tokens(root, ids, impl.get()));
  // At most ids.bound entries: every id that set max_id was checked against it.
  impl->id_to_bytes.resize(static_cast<std::size_t>(ids.max_id) + 1);
  for (const auto& [bytes, id] : impl->vocab) impl->id_to_bytes[id] = bytes;
  for (const detail::AddedToken& t : impl->added) impl->id_to_bytes[t.id] = t.content;
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

}  // namespace mmfeed::text
