// Ranks balanced by compute (balance.h): samples' shapes from their facts, their costs, and the
// report of what balancing gives a run (mmfeed/balance.h). The split itself: balance_split.cc.
#include "pipeline/balance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
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

}  // namespace

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
