// What encoding a conversation costs, as functions of its size (issue 31): the heap a sample over
// max_length holds, counted exactly by the operator new below, and encoding that stays linear as
// the turns grow. Apart from text_test because it replaces the global operator new.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "qwen_tokenizer.h"
#include "text/chat_encode.h"
#include "text/tokenizer.h"

namespace {

// Heap bytes held through operator new, and the most held since the last reset.
std::atomic<std::size_t> g_heap_held{0};
std::atomic<std::size_t> g_heap_peak{0};

void count_in(void* p) {
  const std::size_t held = g_heap_held += malloc_usable_size(p);
  std::size_t peak = g_heap_peak.load();
  while (held > peak && !g_heap_peak.compare_exchange_weak(peak, held)) {
  }
}

}  // namespace

void* operator new(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  count_in(p);
  return p;
}

// GCC sees free() of what operator new returned; here operator new is malloc().
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  g_heap_held -= malloc_usable_size(p);
  std::free(p);
}
#pragma GCC diagnostic pop

void operator delete(void* p, std::size_t) noexcept { operator delete(p); }

// Every other form too: a library that allocates with one (simdjson's nothrow new) and is freed
// with another must meet this pair on both sides, or AddressSanitizer sees a mismatch.
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p != nullptr) count_in(p);
  return p;
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { operator delete(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { operator delete(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { operator delete(p); }

namespace mmfeed::text {
namespace {

// The most heap held while `f` runs, beyond what was held when it started.
template <typename F>
std::size_t peak_heap_of(F&& f) {
  const std::size_t before = g_heap_held.load();
  g_heap_peak = before;
  f();
  return g_heap_peak.load() - before;
}

// A user turn of `bytes` of digits (Qwen writes one token per digit: the most tokens a byte can
// give) and a reply.
Conversation digits_conversation(std::size_t bytes) {
  std::string digits;
  while (digits.size() < bytes) digits += "0123456789";
  return parse_conversation(R"({"messages": [{"role": "user", "content": ")" + digits +
                            R"("}, {"role": "assistant", "content": "ok"}]})")
      .value();
}

// A line of 4 MB refused, or cut, at max_length 4096 once held ~30 bytes of heap per byte of
// text (its ids, offsets and pre-token list, all of it, before max_length was looked at).
// Against the control of the text's own size, it now holds about one copy (the rendering).
TEST(ChatEncodeLimitsTest, Issue31ASampleOverMaxLengthHoldsMemoryForItsFirstTokensOnly) {
  constexpr std::size_t kTextBytes = 4 << 20;
  const Conversation c = digits_conversation(kTextBytes);
  qwen();  // loaded outside the count
  for (const Truncation truncation : {Truncation::kError, Truncation::kTruncate}) {
    SftOptions o;
    o.max_length = 4096;
    o.truncation = truncation;
    Result<SftSample> s = Error(ErrorCode::kInternal, "not run");
    const std::size_t peak =
        peak_heap_of([&] { s = encode_conversation(qwen(), c, ChatTemplate::kQwen3VL, {}, {}, {}, o); });
    EXPECT_LT(peak, 2 * kTextBytes) << "truncation " << static_cast<int>(truncation);
    if (truncation == Truncation::kError) {
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.error().message(),
                "conversation has more than 8193 tokens, more than max_length 4096 (counted no further)");
    } else {
      ASSERT_TRUE(s.ok()) << s.error().to_string();
      EXPECT_EQ(s->input_ids.size(), 4096u);
    }
  }
}

// Cutting from the first tokens gives what cutting the whole encoding gives: a prefix of it, at
// max_length, or where the vision block max_length falls in starts (from its outer
// <|vision_start|> to its outer <|vision_end|>: a timestamped video's groups are one block).
TEST(ChatEncodeLimitsTest, Issue31TruncatingFromTheFirstTokensCutsWhereTheWholeEncodingIsCut) {
  const Conversation c = parse_conversation(R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "look at"}, {"type": "image", "image": "a.jpg"},
                                   {"type": "video", "video": "v.mp4"}, {"type": "text", "text": "and"},
                                   {"type": "image", "image": "b.jpg"}, {"type": "image", "image": "c.jpg"}]},
      {"role": "assistant", "content": "two pictures and a film"}]})")
                             .value();
  const std::vector<Grid3> images = {{1, 4, 4}, {1, 2, 4}, {1, 4, 2}};
  const std::vector<VideoGrid> videos = {{{2, 4, 4}, 1.0, {0.5, 1.5}}};
  const SftSample whole = encode_conversation(qwen(), c, ChatTemplate::kQwen3VL, images, videos, {}).value();
  const std::int32_t start = *qwen().token_to_id("<|vision_start|>"), end = *qwen().token_to_id("<|vision_end|>");
  std::vector<std::pair<std::size_t, std::size_t>> blocks;  // [outer start, outer end]
  int depth = 0;
  for (std::size_t i = 0; i < whole.input_ids.size(); ++i) {
    if (whole.input_ids[i] == start && depth++ == 0) blocks.push_back({i, 0});
    if (whole.input_ids[i] == end && --depth == 0) blocks.back().second = i;
  }
  ASSERT_EQ(blocks.size(), 4u);
  SftOptions o;
  o.truncation = Truncation::kTruncate;
  for (o.max_length = 1; o.max_length < whole.input_ids.size(); ++o.max_length) {
    std::size_t cut = o.max_length;
    for (const auto& [first, last] : blocks) {
      if (first < o.max_length && o.max_length <= last) cut = first;
    }
    const SftSample s = encode_conversation(qwen(), c, ChatTemplate::kQwen3VL, images, videos, {}, o).value();
    ASSERT_EQ(s.input_ids, std::vector<std::int32_t>(whole.input_ids.begin(), whole.input_ids.begin() + cut))
        << "max_length " << o.max_length;
    ASSERT_EQ(s.labels, std::vector<std::int32_t>(whole.labels.begin(), whole.labels.begin() + cut));
  }
}

// `turns` alternating user and assistant turns.
Conversation many_turns(int turns) {
  std::string line = R"({"messages": [)";
  for (int k = 0; k < turns; ++k) {
    line += k == 0 ? "" : ", ";
    line += k % 2 == 0 ? R"({"role": "user", "content": "question )" + std::to_string(k) + "\"}"
                       : R"({"role": "assistant", "content": "answer )" + std::to_string(k) + "\"}";
  }
  return parse_conversation(line + "]}").value();
}

// Labels once searched the assistant turns from the first for every token: 64,000 turns took
// 44-109 s, four times as long for each doubling. 256,000 turns take about a second now; the
// quadratic work would take about half an hour, far past this test's timeout (300 s, in
// CMakeLists.txt), which fails it. No clock is read: the test cannot fail by a machine's speed.
TEST(ChatEncodeLimitsTest, Issue31EncodingIsLinearInTheTurns) {
  constexpr int kTurns = 256'000;
  const auto sample = encode_conversation(qwen(), many_turns(kTurns), ChatTemplate::kQwen3VL, {}, {}, {});
  ASSERT_TRUE(sample.ok()) << sample.error().to_string();
  const auto trained = std::count_if(sample->labels.begin(), sample->labels.end(),
                                     [](std::int32_t label) { return label != kIgnoreIndex; });
  EXPECT_GE(trained, kTurns / 2 * 3);  // each answer's words and its <|im_end|> at least
}

}  // namespace
}  // namespace mmfeed::text
