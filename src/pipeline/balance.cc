// Ranks balanced by compute (balance.h): samples' shapes from their facts, their costs, and the
// split of a step's samples across ranks and batches.
#include "pipeline/balance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "mmfeed/balance.h"
#include "pipeline/packer.h"
#include "storage/credentials.h"
#include "text/chat.h"
#include "text/conversation.h"
#include "vision/profile.h"
#include "vision/video_processor.h"

namespace mmfeed::pipeline {

namespace {

// Without a header to read: an image of 512 x 512, a video of 8 s of 640 x 360 at 30 fps, a clip
// of 10 s; a text token for every 4 bytes of a sample's JSON.
constexpr std::uint32_t kNominalSide = 512;
constexpr MediaFacts kNominalVideo{MediaFacts::Kind::kVideo, MediaFacts::Known::kNotProbed, 640, 360, 8000, 3000};
constexpr double kNominalClipSeconds = 10;
constexpr std::uint64_t kBytesPerToken = 4;
// The audio encoders' tokens a second (Qwen2.5-Omni's: 100 mel frames, pooled by 4).
constexpr double kAudioTokensPerSecond = 25;

// What the cost rules read of the settings, copied so the cost function outlives them.
struct Rules {
  CostModel model;
  std::vector<vision::ModelProfile> images;  // one, or one per manifest
  vision::VideoProfile video;
  std::vector<bool> text_tokens;  // per manifest: its index's text tokens are this run's (trusted_text_tokens)

  const vision::ModelProfile& image(std::uint32_t manifest) const {
    return images.size() == 1 ? images.front() : images.at(manifest);
  }
};

Rules rules_of(const Settings& settings, const dataset::Manifests& manifests) {
  Rules r;
  r.text_tokens = trusted_text_tokens(settings, manifests);
  r.model = cost_model(settings.options);
  if (settings.source_vision.empty()) {
    r.images.push_back(settings.vision.profile);
  } else {
    for (const vision::ProcessorConfig& v : settings.source_vision) r.images.push_back(v.profile);
  }
  r.video = settings.video;
  return r;
}

void add_image(const vision::ModelProfile& p, std::uint32_t width, std::uint32_t height, SampleShape& shape) {
  auto size = smart_resize(static_cast<int>(std::min<std::uint32_t>(height, 1 << 20)),
                           static_cast<int>(std::min<std::uint32_t>(width, 1 << 20)), p);
  if (!size.ok()) size = smart_resize(static_cast<int>(kNominalSide), static_cast<int>(kNominalSide), p);
  if (!size.ok()) return;
  const vision::Grid grid = vision::grid_for(*size, p);
  shape.patches.push_back(static_cast<std::uint64_t>(grid.rows()));
  shape.tokens += static_cast<std::uint64_t>(grid.tokens(p.merge_size));
}

void add_video(const vision::VideoProfile& profile, MediaFacts f, SampleShape& shape) {
  if (f.known != MediaFacts::Known::kRead || f.fps_centi == 0) f = kNominalVideo;
  VideoInfo info;
  info.width = static_cast<int>(std::min<std::uint32_t>(f.width, 1 << 16));
  info.height = static_cast<int>(std::min<std::uint32_t>(f.height, 1 << 16));
  info.fps = f.fps_centi / 100.0;
  info.duration_s = f.duration_ms / 1000.0;
  info.frames = std::max<std::int64_t>(1, std::llround(info.duration_s * info.fps));
  auto plan = vision::plan_video(profile, info, {});
  if (!plan.ok()) return;  // a clip its recipe refuses fails where it is processed
  const vision::Grid& g = plan->grid;
  for (int t = 0; t < g.t; ++t) shape.patches.push_back(static_cast<std::uint64_t>(g.h) * g.w);
  shape.tokens += static_cast<std::uint64_t>(g.tokens(profile.model.merge_size));
}

void add_medium(const Rules& rules, std::uint32_t manifest, const MediaFacts& f, SampleShape& shape) {
  const bool known = f.known == MediaFacts::Known::kRead;
  ++shape.media;
  shape.nominal += known ? 0 : 1;
  switch (f.kind) {
    case MediaFacts::Kind::kImage:
      add_image(rules.image(manifest), known ? f.width : kNominalSide, known ? f.height : kNominalSide, shape);
      break;
    case MediaFacts::Kind::kVideo: add_video(rules.video, f, shape); break;
    case MediaFacts::Kind::kAudio:
      shape.tokens += static_cast<std::uint64_t>(
          std::llround((known ? f.duration_ms / 1000.0 : kNominalClipSeconds) * kAudioTokensPerSecond));
      break;
  }
}

SampleShape shape_of(const Rules& rules, const dataset::Manifests& manifests, std::uint64_t index) {
  SampleShape shape;
  const Result<dataset::ManifestLine> found = manifests.line(index);
  if (!found.ok()) return shape;  // the sample's own processing names what is wrong
  const dataset::ManifestLine& line = *found;
  const dataset::Manifest& m = manifests.files[line.manifest];
  shape.tokens = line.length / kBytesPerToken;
  if (m.index != nullptr) {  // the facts the index read from the media's headers
    const Result<IndexRecord> record = m.index->record(index - m.first_line);
    if (!record.ok()) return shape;
    const IndexRecord& r = *record;
    if (r.text_tokens > 0 && rules.text_tokens[line.manifest]) shape.tokens = r.text_tokens;
    for (std::uint64_t j = r.first_media; j < r.first_media + r.media(); ++j) {
      add_medium(rules, line.manifest, m.index->media(j), shape);
    }
    return shape;
  }
  std::string buffer;
  Result<std::string_view> text = std::string_view();
  if (m.ranges) {  // a shard sample known by its range: its headers and .json read
    auto range = manifests.read_range(line, dataset::kDefaultMaxManifestBytes);
    if (!range.ok()) return shape;
    buffer = std::move(range->json);
    text = std::string_view(buffer);
    shape.tokens = buffer.size() / kBytesPerToken;  // (its range's length counts its media too)
  } else {
    text = manifests.text(line, buffer);
  }
  auto c = text.ok() ? text::parse_conversation(*text) : Result<text::Conversation>(text.error());
  if (!c.ok()) return shape;
  using Type = text::ContentItem::Type;
  const auto add = [&](Type type, MediaFacts::Kind kind) {
    for (std::size_t i = c->count(type); i > 0; --i) {
      add_medium(rules, line.manifest, MediaFacts{.kind = kind}, shape);
    }
  };
  add(Type::kImage, MediaFacts::Kind::kImage);
  add(Type::kVideo, MediaFacts::Kind::kVideo);
  add(Type::kAudio, MediaFacts::Kind::kAudio);
  return shape;
}

struct Item {
  std::uint64_t cost = 0;
  std::uint32_t at = 0;  // its place in the slab (or the rank's list)
};

struct Bin {
  std::vector<Item> items;
  std::uint64_t load = 0;
  std::size_t room = 0;
};

// The largest-first fill, a round at a time: of the items sorted costliest first, each round of
// as many as there are bins with room goes one to each, the costliest to the least loaded (ties:
// the lower bin).
void fill(std::vector<Item> items, std::vector<Bin>& bins) {
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.cost != b.cost ? a.cost > b.cost : a.at < b.at; });
  std::vector<std::size_t> open;
  for (std::size_t next = 0; next < items.size();) {
    open.clear();
    for (std::size_t b = 0; b < bins.size(); ++b) {
      if (bins[b].room > 0) open.push_back(b);
    }
    std::sort(open.begin(), open.end(), [&](std::size_t a, std::size_t b) {
      return bins[a].load != bins[b].load ? bins[a].load < bins[b].load : a < b;
    });
    for (std::size_t k = 0; k < open.size() && next < items.size(); ++k, ++next) {
      Bin& bin = bins[open[k]];
      bin.items.push_back(items[next]);
      bin.load += items[next].cost;
      --bin.room;
    }
  }
}

bool cheaper(const Item& a, const Item& b) { return a.cost != b.cost ? a.cost < b.cost : a.at < b.at; }

// The swap between the fullest bin `hi` and bin `lo` (each sorted by cost) that best lowers the
// larger of the two: an item a of hi for an item x of lo with d = a - x in (0, gap), closest to
// gap / 2; false if none.
bool swap_best(Bin& hi, Bin& lo) {
  const std::uint64_t gap = hi.load - lo.load;
  std::uint64_t best_gain = 0;
  std::size_t best_a = 0, best_x = 0;
  for (std::size_t a = 0; a < hi.items.size(); ++a) {
    const std::uint64_t ca = hi.items[a].cost;
    // Wanted: x near ca - gap / 2, and x > ca - gap (d < gap), x < ca (d > 0).
    const std::uint64_t target = ca > gap / 2 ? ca - gap / 2 : 0;
    const auto it = std::lower_bound(lo.items.begin(), lo.items.end(), target,
                                     [](const Item& i, std::uint64_t v) { return i.cost < v; });
    for (const auto c : {it, it == lo.items.begin() ? lo.items.end() : it - 1}) {
      if (c == lo.items.end() || c->cost >= ca || ca - c->cost >= gap) continue;
      const std::uint64_t d = ca - c->cost;
      const std::uint64_t gain = std::min(d, gap - d);  // how much the larger of the two falls
      if (gain > best_gain) {
        best_gain = gain;
        best_a = a;
        best_x = static_cast<std::size_t>(c - lo.items.begin());
      }
    }
  }
  if (best_gain == 0) return false;
  const std::uint64_t d = hi.items[best_a].cost - lo.items[best_x].cost;
  std::swap(hi.items[best_a], lo.items[best_x]);
  hi.load -= d;
  lo.load += d;
  std::sort(hi.items.begin(), hi.items.end(), cheaper);
  std::sort(lo.items.begin(), lo.items.end(), cheaper);
  return true;
}

// Swaps that lower the fullest bin, tried against the others (the emptiest first), until none
// does, the fullest is within 1/kClose of the mean, or kTries x bins swaps were tried (a bound on
// the plan's time that every rank meets at the same swap). The bins are kept ordered by load
// (ties: the lower bin), so a round costs a few set updates, not a sort.
constexpr std::uint64_t kClose = 256;
constexpr std::size_t kTries = 24;

void refine(std::vector<Bin>& bins) {
  std::uint64_t total = 0;
  std::set<std::pair<std::uint64_t, std::size_t>> by_load;
  for (std::size_t b = 0; b < bins.size(); ++b) {
    std::sort(bins[b].items.begin(), bins[b].items.end(), cheaper);
    by_load.emplace(bins[b].load, b);
    total += bins[b].load;
  }
  const std::uint64_t floor_mean = total / std::max<std::size_t>(bins.size(), 1);
  std::size_t tries = kTries * bins.size();
  while (by_load.size() > 1) {
    const std::size_t h = std::prev(by_load.end())->second;
    if (bins[h].load <= floor_mean + 1 + floor_mean / kClose) return;  // at the mean, near enough
    std::optional<std::size_t> partner;
    const std::uint64_t was_h = bins[h].load;
    std::uint64_t was_l = 0;
    for (auto it = by_load.begin(); it->second != h && !partner; ++it) {
      if (bins[h].load - it->first < 2 || tries == 0) return;  // the others are fuller still; or time is up
      --tries;
      was_l = it->first;
      if (swap_best(bins[h], bins[it->second])) partner = it->second;
    }
    if (!partner) return;
    by_load.erase({was_h, h});  // (the loop above no longer walks the set)
    by_load.erase({was_l, *partner});
    by_load.emplace(bins[h].load, h);
    by_load.emplace(bins[*partner].load, *partner);
  }
}

// `items` split into bins of the given rooms, the largest load least.
std::vector<Bin> partition(std::vector<Item> items, const std::vector<std::size_t>& rooms) {
  std::vector<Bin> bins(rooms.size());
  for (std::size_t b = 0; b < rooms.size(); ++b) bins[b].room = rooms[b];
  fill(std::move(items), bins);
  refine(bins);
  return bins;
}

// The move from the fullest bin `hi` (above `least` items) to bin `lo` (below `most`) of the item
// that best lowers the larger of the two: cost c in (0, gap), closest to gap / 2; false if none.
bool move_best(Bin& hi, Bin& lo, std::size_t least, std::size_t most) {
  if (hi.items.size() <= least || lo.items.size() >= most || hi.load <= lo.load) return false;
  const std::uint64_t gap = hi.load - lo.load;
  std::uint64_t best_gain = 0;
  std::size_t best = 0;
  for (std::size_t a = 0; a < hi.items.size(); ++a) {
    const std::uint64_t c = hi.items[a].cost;
    const std::uint64_t gain = c > 0 && c < gap ? std::min(c, gap - c) : 0;
    if (gain > best_gain) {
      best_gain = gain;
      best = a;
    }
  }
  if (best_gain == 0) return false;
  const Item moved = hi.items[best];
  hi.items.erase(hi.items.begin() + static_cast<std::ptrdiff_t>(best));
  hi.load -= moved.cost;
  lo.items.push_back(moved);
  lo.load += moved.cost;
  std::sort(lo.items.begin(), lo.items.end(), cheaper);
  return true;
}

// A move from the fullest bin to the lightest that lowers it (move_best); false if none does.
bool move_from_fullest(std::vector<Bin>& bins, std::size_t least, std::size_t most) {
  const auto by_load = [&](std::size_t a, std::size_t b) {
    return bins[a].load != bins[b].load ? bins[a].load < bins[b].load : a < b;
  };
  std::vector<std::size_t> order(bins.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), by_load);
  Bin& fullest = bins[order.back()];
  for (std::size_t k = 0; k + 1 < order.size(); ++k) {
    if (move_best(fullest, bins[order[k]], least, most)) return true;
  }
  return false;
}

// `items` split into `count` bins of `least` to `most` items each (so that the items fill them:
// count x least <= items <= count x most), the largest load least: largest first to the least
// loaded bin with room (to the bins still short of `least` when no more items are left than they
// lack), then moves from the fullest bin to the lightest that lowers it, then refine()'s swaps.
std::vector<Bin> partition_free(std::vector<Item> items, std::size_t count, std::size_t least, std::size_t most) {
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.cost != b.cost ? a.cost > b.cost : a.at < b.at; });
  std::vector<Bin> bins(count);
  std::size_t short_of = count * least;  // what the bins still lack of `least`
  for (std::size_t next = 0; next < items.size(); ++next) {
    const bool must_fill = items.size() - next <= short_of;
    std::optional<std::size_t> to;
    for (std::size_t b = 0; b < count; ++b) {
      const std::size_t held = bins[b].items.size();
      if (held >= most || (must_fill && held >= least)) continue;
      if (!to || bins[b].load < bins[*to].load) to = b;
    }
    if (bins[*to].items.size() < least) --short_of;
    bins[*to].items.push_back(items[next]);
    bins[*to].load += items[next].cost;
  }
  for (Bin& b : bins) std::sort(b.items.begin(), b.items.end(), cheaper);
  for (std::size_t tries = kTries * count; tries > 0; --tries) {
    if (!move_from_fullest(bins, least, most)) break;
  }
  refine(bins);
  return bins;
}

}  // namespace

std::vector<std::vector<std::size_t>> free_split(std::span<const std::uint64_t> costs, int world, std::size_t least,
                                                 std::size_t most) {
  const auto w = static_cast<std::size_t>(world);
  std::vector<Item> items(costs.size());
  for (std::size_t i = 0; i < costs.size(); ++i) items[i] = {costs[i], static_cast<std::uint32_t>(i)};
  std::vector<Bin> bins = partition_free(items, w, least, most);
  // Equal counts are one of the splits allowed: the free plan is never worse than theirs.
  const std::size_t n = costs.size() / w;
  if (costs.size() % w == 0 && least <= n && n <= most) {
    std::vector<Bin> equal = partition(std::move(items), std::vector<std::size_t>(w, n));
    const auto largest = [](const std::vector<Bin>& split) {
      return std::max_element(split.begin(), split.end(), [](const Bin& a, const Bin& b) { return a.load < b.load; })
          ->load;
    };
    if (largest(equal) < largest(bins)) bins = std::move(equal);
  }
  std::vector<std::vector<std::size_t>> ranks;
  for (const Bin& b : bins) {
    ranks.emplace_back();
    for (const Item& item : b.items) ranks.back().push_back(item.at);
    std::sort(ranks.back().begin(), ranks.back().end());
  }
  return ranks;
}

CostModel cost_model(const LoaderConfig& config) {
  if (config.balance != Balance::kCompute) return CostModel{1, 0, 0, 0};
  if (config.balance_cost.size() == 4) {
    const auto& c = config.balance_cost;
    return CostModel{c[0], c[1], c[2], c[3]};
  }
  // Forward FLOPs: 2 a parameter a token; attention 4 x layers x width a (query, key) pair.
  return CostModel{2 * 7.6e9, 4.0 * 28 * 3584, 2 * 6.75e8, 4.0 * 32 * 1280};
}

std::uint64_t cost_of(const SampleShape& shape, const CostModel& model) {
  const auto n = static_cast<double>(shape.tokens);
  double flops = model.llm_token * n + model.llm_pair * n * (n + 1) / 2;  // causal: each token its past
  for (const std::uint64_t p : shape.patches) {
    const auto v = static_cast<double>(p);
    flops += model.vision_patch * v + model.vision_pair * v * v;  // the ViT attends both ways
  }
  // In millions (a unit of 1 where the model counts tokens), saturated far below 2^64.
  const double unit = model.llm_pair == 0 && model.vision_patch == 0 && model.vision_pair == 0 ? 1 : 1e6;
  return static_cast<std::uint64_t>(std::llround(std::min(flops / unit, 1e18)));
}

std::vector<bool> trusted_text_tokens(const Settings& settings, const dataset::Manifests& manifests) {
  std::vector<bool> out(manifests.files.size(), false);
  std::unordered_map<std::string, std::uint32_t> keys;  // by chat template: the tokenizer read once each
  for (std::size_t i = 0; i < manifests.files.size(); ++i) {
    const dataset::Manifest& m = manifests.files[i];
    if (m.index == nullptr || m.index->header().tokens_key == 0) continue;
    const text::ChatTemplate t =
        i < settings.source_templates.size() ? settings.source_templates[i] : settings.chat_template;
    const std::string name(text::chat_template_name(t));
    auto it = keys.find(name);
    if (it == keys.end()) {
      const Result<std::uint32_t> key = text_tokens_key(settings.options.tokenizer, name);
      it = keys.emplace(name, key.ok() ? *key : 0).first;
    }
    out[i] = it->second == m.index->header().tokens_key;
  }
  return out;
}

SampleShape sample_shape(const Settings& settings, const dataset::Manifests& manifests, std::uint64_t index) {
  return shape_of(rules_of(settings, manifests), manifests, index);
}

CostFn sample_costs(const Settings& settings, const dataset::Manifests& manifests, std::shared_ptr<const void> owner) {
  return [rules = rules_of(settings, manifests), &manifests, owner = std::move(owner)](
             std::uint64_t index, const CostModel& model) { return cost_of(shape_of(rules, manifests, index), model); };
}

void balance_step(std::span<std::uint64_t> slab, std::span<std::uint64_t> costs, int world, std::size_t batch) {
  const auto w = static_cast<std::size_t>(world);
  // (Items name their place in 32 bits: a step of more samples is left as drawn.)
  if (slab.size() % w != 0 || slab.empty() || batch == 0 || slab.size() > UINT32_MAX) return;
  const std::size_t n = slab.size() / w;
  std::vector<Item> items(slab.size());
  for (std::size_t i = 0; i < slab.size(); ++i) items[i] = {costs[i], static_cast<std::uint32_t>(i)};
  std::vector<Bin> ranks = partition(items, std::vector<std::size_t>(w, n));
  std::vector<std::size_t> rooms(n / batch, batch);
  if (n % batch != 0) rooms.push_back(n % batch);
  const std::vector<std::uint64_t> drawn(slab.begin(), slab.end());
  for (std::size_t r = 0; r < w; ++r) {
    std::size_t k = 0;
    std::vector<Bin> batches;
    if (rooms.size() == 1) {
      batches.push_back(std::move(ranks[r]));  // one batch a step: nothing to split
    } else {
      batches = partition(std::move(ranks[r].items), rooms);
    }
    for (Bin& b : batches) {
      std::sort(b.items.begin(), b.items.end(), [](const Item& x, const Item& y) { return x.at < y.at; });
      for (const Item& item : b.items) {
        slab[k * w + r] = drawn[item.at];
        costs[k * w + r] = item.cost;
        ++k;
      }
    }
  }
}

StepCost step_cost(std::span<const std::uint64_t> costs, int world) {
  const auto w = static_cast<std::size_t>(world);
  std::vector<std::uint64_t> ranks(w, 0);
  for (std::size_t i = 0; i < costs.size(); ++i) ranks[i % w] += costs[i];
  const std::uint64_t total = std::accumulate(ranks.begin(), ranks.end(), std::uint64_t{0});
  return {*std::max_element(ranks.begin(), ranks.end()), static_cast<double>(total) / static_cast<double>(w)};
}

}  // namespace mmfeed::pipeline

namespace mmfeed {

double BalanceReport::mean_drawn() const {
  double sum = 0;
  for (const BalanceStep& s : steps) sum += s.drawn_mean > 0 ? static_cast<double>(s.drawn_max) / s.drawn_mean : 1;
  return steps.empty() ? 1 : sum / static_cast<double>(steps.size());
}

double BalanceReport::mean_free() const {
  double sum = 0;
  std::size_t n = 0;
  for (const BalanceStep& s : steps) {
    if (s.free_max == 0 || !(s.drawn_mean > 0)) continue;
    sum += static_cast<double>(s.free_max) / s.drawn_mean;
    ++n;
  }
  return n == 0 ? 0 : sum / static_cast<double>(n);
}

double BalanceReport::mean_planned() const {
  double sum = 0;
  for (const BalanceStep& s : steps) {
    sum += s.planned_mean > 0 ? static_cast<double>(s.planned_max) / s.planned_mean : 1;
  }
  return steps.empty() ? 1 : sum / static_cast<double>(steps.size());
}

namespace {

using Clock = std::chrono::steady_clock;

// A packed run's rows, each rank's in the order it makes them: a row's FLOPs.
using RankRows = std::vector<std::vector<std::uint64_t>>;

// What the report knows of one group of samples (a padded step, or a packing window of every
// rank): the plan's cost, the FLOPs and the LLM tokens of each sample, by sample.
struct Pricing {
  const pipeline::Rules& plan;   // what the plan balances
  const pipeline::Rules& judge;  // what the report counts: FLOPs
  const dataset::Manifests& manifests;
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> flops_tokens;
};

// Each rank's share of an arranged window (rank r's k-th at k x world + r) packed into rows by
// its samples' estimated tokens, as the Loader packs them (pack_rows); the rows' FLOPs appended.
void pack_ranks(std::span<const std::uint64_t> slab, const Pricing& pricing, std::size_t budget, RankRows& rows) {
  const std::size_t world = rows.size();
  std::vector<std::size_t> lengths;
  std::vector<std::uint64_t> flops;
  for (std::size_t r = 0; r < world; ++r) {
    lengths.clear();
    flops.clear();
    for (std::size_t i = r; i < slab.size(); i += world) {
      const auto& [f, tokens] = pricing.flops_tokens.at(slab[i]);
      lengths.push_back(static_cast<std::size_t>(std::min<std::uint64_t>(tokens, budget)));
      flops.push_back(f);
    }
    for (const std::vector<std::size_t>& row : pipeline::pack_rows(lengths, budget)) {
      std::uint64_t sum = 0;
      for (const std::size_t i : row) sum += flops[i];
      rows[r].push_back(sum);
    }
  }
}

// The steps of a packed run (rows_a_step rows a rank each), as long as every rank has rows in
// both arrangements.
std::vector<BalanceStep> packed_steps(const RankRows& drawn, const RankRows& planned, std::size_t rows_a_step) {
  std::size_t rows = SIZE_MAX;
  for (const RankRows* arrangement : {&drawn, &planned}) {
    for (const auto& rank : *arrangement) rows = std::min(rows, rank.size());
  }
  std::vector<BalanceStep> steps;
  const auto step = [&](const RankRows& ranks, std::size_t k) {
    std::vector<std::uint64_t> loads;
    for (const auto& rank : ranks) {
      loads.push_back(std::accumulate(rank.begin() + static_cast<std::ptrdiff_t>(k * rows_a_step),
                                      rank.begin() + static_cast<std::ptrdiff_t>((k + 1) * rows_a_step),
                                      std::uint64_t{0}));
    }
    return pipeline::step_cost(loads, static_cast<int>(loads.size()));
  };
  for (std::size_t k = 0; k < rows / rows_a_step; ++k) {
    const pipeline::StepCost a = step(drawn, k), b = step(planned, k);
    steps.push_back({a.max, a.mean, b.max, b.mean});
  }
  return steps;
}

// A packed run's rows so far, each rank's, as drawn and as planned.
struct Packing {
  std::size_t budget = 0;  // 0: padded
  RankRows drawn, planned;
};

// One group's report: priced, its FLOPs split as drawn, planned, its FLOPs as planned. Padded:
// the step it is; packed: its rows appended to each rank's.
void report_group(std::span<std::uint64_t> slab, const LoaderConfig& config, std::size_t batch, Pricing& pricing,
                  BalanceReport& report, Packing& packing) {
  std::vector<std::uint64_t> costs(slab.size()), judged(slab.size());
  pricing.flops_tokens.clear();
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < slab.size(); ++i) {
    costs[i] = pipeline::cost_of(pipeline::shape_of(pricing.plan, pricing.manifests, slab[i]), pricing.plan.model);
  }
  const auto t1 = Clock::now();
  for (std::size_t i = 0; i < slab.size(); ++i) {
    const pipeline::SampleShape shape = pipeline::shape_of(pricing.judge, pricing.manifests, slab[i]);
    judged[i] = pipeline::cost_of(shape, pricing.judge.model);
    pricing.flops_tokens[slab[i]] = {judged[i], shape.tokens};
    report.media += shape.media;
    report.media_nominal += shape.nominal;
  }
  const pipeline::StepCost before = pipeline::step_cost(judged, config.world_size);
  if (packing.budget > 0) pack_ranks(slab, pricing, packing.budget, packing.drawn);
  std::uint64_t free_max = 0;  // padded: with per-rank counts free, a batch 1 to twice batch_size
  if (packing.budget == 0) {
    const std::size_t batches = config.gradient_accumulation_steps;
    for (const auto& rank : pipeline::free_split(costs, config.world_size, batches, 2 * batch * batches)) {
      std::uint64_t load = 0;
      for (const std::size_t i : rank) load += judged[i];
      free_max = std::max(free_max, load);
    }
  }
  const auto t2 = Clock::now();
  pipeline::balance_step(slab, costs, config.world_size, batch);
  const auto t3 = Clock::now();
  report.cost_seconds += std::chrono::duration<double>(t1 - t0).count();
  report.plan_seconds += std::chrono::duration<double>(t3 - t2).count();
  report.samples += slab.size();
  if (packing.budget > 0) {
    pack_ranks(slab, pricing, packing.budget, packing.planned);
    return;
  }
  for (std::size_t i = 0; i < slab.size(); ++i) judged[i] = pricing.flops_tokens.at(slab[i]).first;
  const pipeline::StepCost after = pipeline::step_cost(judged, config.world_size);
  report.steps.push_back({before.max, before.mean, after.max, after.mean, free_max});
}

}  // namespace

std::array<double, 4> planned_cost(const LoaderConfig& config) {
  const pipeline::CostModel c = pipeline::cost_model(config);
  return {c.llm_token, c.llm_pair, c.vision_patch, c.vision_pair};
}

Result<BalanceReport> balance_report(const LoaderConfig& given) {
  LoaderConfig config = given;
  if (config.balance == Balance::kNone) config.balance = Balance::kCompute;
  config.rank = 0;
  if (config.tokenizer.empty()) config.tokenizer = "(none: the report reads no tokenizer)";
  MMFEED_ASSIGN_OR_RETURN(const pipeline::Settings settings, pipeline::check_config(config));
  MMFEED_ASSIGN_OR_RETURN(storage::S3Options s3, storage::s3_options_from_environment());
  MMFEED_ASSIGN_OR_RETURN(
      const dataset::Manifests manifests,
      dataset::read_manifests(config.manifests, config.max_manifest_bytes, s3,
                              {.use = true, .cache_dir = config.cache_dir, .media_root = config.media_root}));
  MMFEED_ASSIGN_OR_RETURN(const pipeline::Population population, pipeline::population_of(config, manifests));
  const pipeline::Rules plan = pipeline::rules_of(settings, manifests);
  pipeline::Rules judge = plan;
  LoaderConfig flops = config;
  flops.balance = Balance::kCompute;
  judge.model = pipeline::cost_model(flops);
  Pricing pricing{plan, judge, manifests, {}};
  // A group: a padded step's samples (world x accumulation x batch), or a packing window of
  // every rank's (world x pack_window), as the Loader balances them.
  const std::size_t batch = group_positions(config);
  const std::size_t group = static_cast<std::size_t>(config.world_size) * batch *
                            (config.token_budget > 0 ? 1 : config.gradient_accumulation_steps);
  Packing packing{config.token_budget, RankRows(static_cast<std::size_t>(config.world_size)),
                  RankRows(static_cast<std::size_t>(config.world_size))};
  BalanceReport report;
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    // The epoch's permutation, as the ranks deal it; its whole groups.
    std::vector<std::uint64_t> dealt = pipeline::rank_order(population, config.seed, epoch, 0, 1, config.shuffle);
    for (std::size_t first = 0; first + group <= dealt.size(); first += group) {
      report_group(std::span<std::uint64_t>(dealt.data() + first, group), config, batch, pricing, report, packing);
    }
  }
  if (packing.budget > 0)
    report.steps = packed_steps(packing.drawn, packing.planned, config.gradient_accumulation_steps);
  return report;
}

}  // namespace mmfeed
