#include "core/metrics.h"

#include "mmfeed/json.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace mmfeed::core {

void Gauge::set(std::int64_t v) {
  value_.store(v, std::memory_order_relaxed);
  raise_max(v);
}

void Gauge::add(std::int64_t delta) { raise_max(value_.fetch_add(delta, std::memory_order_relaxed) + delta); }

void Gauge::raise_max(std::int64_t v) {
  std::int64_t seen = max_.load(std::memory_order_relaxed);
  while (v > seen && !max_.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
  }
}

std::size_t Histogram::bucket_index(std::uint64_t value) {
  if (value < kSub) return static_cast<std::size_t>(value);
  const int octave = static_cast<int>(std::bit_width(value)) - 1;  // >= kSubBits
  const int shift = octave - kSubBits;
  const std::size_t sub = static_cast<std::size_t>(value >> shift) - kSub;
  return kSub + static_cast<std::size_t>(shift) * kSub + sub;
}

std::uint64_t Histogram::bucket_low(std::size_t index) {
  if (index < kSub) return index;
  const std::size_t shift = (index - kSub) / kSub;
  const std::size_t sub = (index - kSub) % kSub;
  return static_cast<std::uint64_t>(kSub + sub) << shift;
}

std::uint64_t Histogram::bucket_high(std::size_t index) {
  if (index < kSub) return index;
  const std::size_t shift = (index - kSub) / kSub;
  return bucket_low(index) + ((std::uint64_t{1} << shift) - 1);
}

void Histogram::record(std::uint64_t value) {
  buckets_[bucket_index(value)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  std::uint64_t seen = min_.load(std::memory_order_relaxed);
  while (value < seen && !min_.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
  seen = max_.load(std::memory_order_relaxed);
  while (value > seen && !max_.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot s;
  s.buckets.resize(kBuckets);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    total += s.buckets[i];
  }
  // Count from the buckets so that percentiles stay consistent with them even while other
  // threads record concurrently.
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  s.min = total ? min_.load(std::memory_order_relaxed) : 0;
  s.max = total ? max_.load(std::memory_order_relaxed) : 0;
  return s;
}

std::uint64_t HistogramSnapshot::percentile(double q) const {
  if (count == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const auto rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    seen += buckets[i];
    if (seen >= rank) {
      const std::uint64_t low = Histogram::bucket_low(i);
      const std::uint64_t mid = low + (Histogram::bucket_high(i) - low) / 2;
      return std::clamp(mid, min, max);
    }
  }
  return max;
}

void MetricsRegistry::claim(std::string_view name, Kind kind) {
  auto it = kinds_.find(name);
  if (it == kinds_.end()) {
    kinds_.emplace(std::string(name), kind);
  } else if (it->second != kind) {
    throw std::logic_error("metric '" + std::string(name) + "' already registered as another kind");
  }
}

template <class Map>
static auto& get_or_create(Map& map, std::string_view name) {
  auto it = map.find(name);
  if (it == map.end()) {
    using Metric = typename Map::mapped_type::element_type;
    it = map.emplace(std::string(name), std::make_unique<Metric>()).first;
  }
  return *it->second;
}

Counter& MetricsRegistry::counter(std::string_view name) {
  std::lock_guard lock(mu_);
  claim(name, Kind::kCounter);
  return get_or_create(counters_, name);
}

Gauge& MetricsRegistry::gauge(std::string_view name) {
  std::lock_guard lock(mu_);
  claim(name, Kind::kGauge);
  return get_or_create(gauges_, name);
}

Histogram& MetricsRegistry::histogram(std::string_view name) {
  std::lock_guard lock(mu_);
  claim(name, Kind::kHistogram);
  return get_or_create(histograms_, name);
}

MetricsSnapshot MetricsRegistry::snapshot() const {
  std::lock_guard lock(mu_);
  MetricsSnapshot s;
  for (const auto& [name, c] : counters_) s.counters[name] = c->value();
  for (const auto& [name, g] : gauges_) s.gauges[name] = {g->value(), g->max()};
  for (const auto& [name, h] : histograms_) s.histograms[name] = h->snapshot();
  return s;
}

std::string MetricsRegistry::to_json() const {
  const MetricsSnapshot s = snapshot();
  std::string out = "{\"counters\":{";
  const char* sep = "";
  for (const auto& [name, value] : s.counters) {
    out += sep;
    append_json_string(out, name);
    out += ':' + std::to_string(value);
    sep = ",";
  }
  out += "},\"gauges\":{";
  sep = "";
  for (const auto& [name, g] : s.gauges) {
    out += sep;
    append_json_string(out, name);
    out += ":{\"value\":" + std::to_string(g.first) + ",\"max\":" + std::to_string(g.second) + "}";
    sep = ",";
  }
  out += "},\"histograms\":{";
  sep = "";
  for (const auto& [name, h] : s.histograms) {
    char mean[32];
    std::snprintf(mean, sizeof mean, "%.3f", h.mean());
    out += sep;
    append_json_string(out, name);
    out += ":{\"count\":" + std::to_string(h.count) + ",\"sum\":" + std::to_string(h.sum) +
           ",\"min\":" + std::to_string(h.min) + ",\"max\":" + std::to_string(h.max) + ",\"mean\":" + mean +
           ",\"p50\":" + std::to_string(h.percentile(0.5)) + ",\"p90\":" + std::to_string(h.percentile(0.9)) +
           ",\"p99\":" + std::to_string(h.percentile(0.99)) + "}";
    sep = ",";
  }
  out += "}}";
  return out;
}

std::string MetricsRegistry::to_text() const {
  const MetricsSnapshot s = snapshot();
  std::map<std::string, std::string> lines;
  for (const auto& [name, value] : s.counters) lines[name] = std::to_string(value);
  for (const auto& [name, g] : s.gauges) {
    lines[name] = std::to_string(g.first) + " (max " + std::to_string(g.second) + ")";
  }
  for (const auto& [name, h] : s.histograms) {
    lines[name] = "count=" + std::to_string(h.count) + " min=" + std::to_string(h.min) +
                  " p50=" + std::to_string(h.percentile(0.5)) + " p90=" + std::to_string(h.percentile(0.9)) +
                  " p99=" + std::to_string(h.percentile(0.99)) + " max=" + std::to_string(h.max);
  }
  std::string out;
  for (const auto& [name, text] : lines) out += name + " " + text + "\n";
  return out;
}

}  // namespace mmfeed::core
