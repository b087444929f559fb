// How a manifest's samples are described for its dataset index (index_describe.h).
#include "dataset/index_describe.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

#include "core/cpus.h"
#include "core/models.h"
#include "dataset/index.h"
#include "dataset/media_facts.h"
#include "text/chat_encode.h"
#include "text/conversation.h"

namespace mmfeed::dataset {

namespace {

constexpr std::size_t kNamed = kSummaryNamed;

std::uint16_t saturated(std::size_t n) { return static_cast<std::uint16_t>(std::min<std::size_t>(n, UINT16_MAX)); }

// The facts of each medium of `refs` (of `kind`) for sample `line`, added to `out`.
void probe_all(const Manifests& manifests, const ManifestLine& line, const IndexOptions& options, MediaFacts::Kind kind,
               const std::vector<std::string>& refs, MediaProber& out) {
  for (const std::string& ref : refs) {
    if (!options.probe_media) {
      out.media.push_back(MediaFacts{.kind = kind});
      ++out.not_probed;
      continue;
    }
    auto source = resolve_media(ref, manifests, line, options.media_root, false);
    out.add(kind, source.ok() ? Result<storage::ObjectUri>(source->uri) : Result<storage::ObjectUri>(source.error()),
            manifests.where(line) + ": " + ref);
  }
}

// The tokens of conversation `c` as the Loader encodes it with `counter`, its media's placeholders
// apart (each encoded as one token, then taken away); 0 where it does not encode, or past u32.
std::uint32_t text_tokens(const TokenCounter& counter, const text::Conversation& c, std::size_t images,
                          std::size_t videos, std::size_t audio) {
  const std::vector<text::Grid3> grids(images, text::Grid3{1, 2, 2});
  const std::vector<text::VideoGrid> clips(videos, text::VideoGrid{{1, 2, 2}, 1.0, {0.0}, 0});
  const std::vector<std::int64_t> sounds(audio, 1);
  auto s = text::encode_conversation(*counter.tokenizer, c, counter.chat_template, grids, clips, sounds);
  if (!s.ok() || s->input_ids.size() < images + videos + audio) return 0;
  return static_cast<std::uint32_t>(std::min<std::size_t>(s->input_ids.size() - images - videos - audio, UINT32_MAX));
}

// Sample `line`'s record: where it lies (the text starting at `start` in the file) and, its text
// parsed, what it names, its text's tokens (where `counter` is given) and its media's facts
// appended to `out`.
void describe(const Manifests& manifests, const ManifestLine& line, std::uint64_t start, const IndexOptions& options,
              const TokenCounter* counter, std::string& buffer, IndexRecord& r, MediaProber& out) {
  r.offset = start + line.offset;
  r.number = line.number;
  r.length = line.length;
  r.first_media = out.media.size();
  const Result<std::string_view> text = manifests.text(line, buffer);  // the text was read whole
  auto c = text.ok() ? text::parse_conversation(*text) : Result<text::Conversation>(text.error());
  if (!c.ok()) {
    r.bad = true;
    return;
  }
  using Type = text::ContentItem::Type;
  const std::vector<std::string> images = c->media(Type::kImage), videos = c->media(Type::kVideo),
                                 audio = c->media(Type::kAudio);
  r.images = saturated(images.size());
  r.videos = saturated(videos.size());
  r.audio = saturated(audio.size());
  if (counter != nullptr) r.text_tokens = text_tokens(*counter, *c, images.size(), videos.size(), audio.size());
  probe_all(manifests, line, options, MediaFacts::Kind::kImage, {images.begin(), images.begin() + r.images}, out);
  probe_all(manifests, line, options, MediaFacts::Kind::kVideo, {videos.begin(), videos.begin() + r.videos}, out);
  probe_all(manifests, line, options, MediaFacts::Kind::kAudio, {audio.begin(), audio.begin() + r.audio}, out);
}

}  // namespace

Result<std::uint32_t> text_start(std::string_view head, const std::string& source) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(head[i]); };
  if (compressed(head)) {
    return Error(ErrorCode::kUnsupported, "a compressed manifest cannot be read by byte range; index it decompressed",
                 source);
  }
  return head.size() >= 3 && byte(0) == 0xEF && byte(1) == 0xBB && byte(2) == 0xBF ? 3u : 0u;
}

Result<std::optional<TokenCounter>> token_counter(const IndexOptions& options, std::uint32_t& tokens_key) {
  if (options.tokenizer.empty()) return std::optional<TokenCounter>();
  MMFEED_ASSIGN_OR_RETURN(const ModelRow* model, find_model(options.model));
  std::optional<TokenCounter> counter(std::in_place);
  MMFEED_ASSIGN_OR_RETURN(
      counter->chat_template,
      text::chat_template(options.chat_template.empty() ? model->default_template : options.chat_template));
  MMFEED_ASSIGN_OR_RETURN(counter->tokenizer, text::Tokenizer::from_file(options.tokenizer));
  MMFEED_ASSIGN_OR_RETURN(tokens_key,
                          text_tokens_key(options.tokenizer, text::chat_template_name(counter->chat_template)));
  return counter;
}

void describe_range(const Manifests& manifests, std::uint64_t first, std::uint64_t end, std::uint64_t start,
                    const IndexOptions& options, const storage::S3Options& s3, const TokenCounter* counter,
                    DatasetIndex& index, ChunkCounts& chunk) {
  const std::uint64_t n = end - first;
  const auto threads = static_cast<std::size_t>(std::clamp(core::usable_cpus(), 1, 64));
  const std::uint64_t per = (n + threads - 1) / threads;
  std::vector<MediaProber> slices;
  slices.reserve(threads);
  // The GETs in flight shared among the slices: as many over 2 cores as over 64 (a slice's at least 32).
  const std::size_t in_flight = std::max<std::size_t>(32, kMediaInFlight / threads);
  for (std::size_t t = 0; t < threads; ++t) slices.emplace_back(s3, kNamed, in_flight);
  const auto slice = [&](std::size_t t) {
    std::string buffer;
    for (std::uint64_t i = first + t * per; i < std::min(end, first + (t + 1) * per); ++i) {
      describe(manifests, manifests.held[i], start, options, counter, buffer, index.records[i], slices[t]);
    }
    slices[t].flush();
  };
  std::vector<std::thread> pool;
  std::size_t inline_from = threads;
  for (std::size_t t = 1; t < threads && inline_from == threads; ++t) {
    try {
      pool.emplace_back(slice, t);
    } catch (const std::system_error&) {
      inline_from = t;
    }
  }
  slice(0);
  for (std::size_t t = inline_from; t < threads; ++t) slice(t);
  for (std::thread& th : pool) th.join();
  for (std::size_t t = 0; t < threads; ++t) {
    const std::uint64_t base = index.media.size();
    for (std::uint64_t i = first + t * per; i < std::min(end, first + (t + 1) * per); ++i) {
      index.records[i].first_media += base;
    }
    index.media.insert(index.media.end(), slices[t].media.begin(), slices[t].media.end());
    for (std::string& u : slices[t].unreadable) {
      if (chunk.named.size() < kNamed) chunk.named.push_back(std::move(u));
    }
    chunk.unreadable += slices[t].unreadable_count;
    chunk.not_probed += slices[t].not_probed;
  }
}

}  // namespace mmfeed::dataset
