// The metrics registry: named counters, gauges and histograms every stage reports to.
//
// Recording is lock-free (relaxed atomics) so stages can record per object on hot paths;
// only creating a metric takes a lock, and the returned reference stays valid for the
// registry's lifetime, so stages look their metrics up once.
//
// Histograms are log-linear over non-negative integers (nanoseconds, bytes): exact below 32,
// then 32 buckets per power of two, so a percentile is within 1/32 (3.2%) of the true value.
//
// Example:
//   MetricsRegistry metrics;
//   auto& fetched = metrics.counter("fetch.objects");
//   auto& latency = metrics.histogram("fetch.latency_ns");
//   fetched.add();
//   latency.record(elapsed_ns);
//   std::cout << metrics.to_text();   // fetch.latency_ns count=1 p50=... p99=...
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace mmfeed::core {

class Counter {
 public:
  void add(std::int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

// A level that goes up and down (queue depth, bytes in flight); remembers its maximum.
class Gauge {
 public:
  void set(std::int64_t v);
  void add(std::int64_t delta);
  std::int64_t value() const { return value_.load(std::memory_order_relaxed); }
  std::int64_t max() const { return max_.load(std::memory_order_relaxed); }

 private:
  void raise_max(std::int64_t v);
  std::atomic<std::int64_t> value_{0};
  std::atomic<std::int64_t> max_{0};
};

struct HistogramSnapshot {
  std::uint64_t count = 0;
  std::uint64_t sum = 0;
  std::uint64_t min = 0;
  std::uint64_t max = 0;
  std::vector<std::uint64_t> buckets;  // counts per bucket index

  double mean() const { return count ? static_cast<double>(sum) / static_cast<double>(count) : 0.0; }
  // The q-quantile (0 <= q <= 1) by nearest rank, from the bucket holding that rank,
  // clamped to [min, max]. 0 when empty.
  std::uint64_t percentile(double q) const;
};

class Histogram {
 public:
  static constexpr int kSubBits = 5;  // 32 sub-buckets per power of two
  static constexpr std::size_t kSub = std::size_t{1} << kSubBits;
  static constexpr std::size_t kBuckets = kSub + (64 - kSubBits) * kSub;

  void record(std::uint64_t value);
  HistogramSnapshot snapshot() const;

  static std::size_t bucket_index(std::uint64_t value);
  // The smallest and largest values that land in bucket `index`.
  static std::uint64_t bucket_low(std::size_t index);
  static std::uint64_t bucket_high(std::size_t index);

 private:
  std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> min_{UINT64_MAX};
  std::atomic<std::uint64_t> max_{0};
};

struct MetricsSnapshot {
  std::map<std::string, std::int64_t> counters;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> gauges;  // value, max
  std::map<std::string, HistogramSnapshot> histograms;
};

class MetricsRegistry {
 public:
  // Get-or-create by name. One name is one kind: asking for a counter under a gauge's name
  // is a bug and throws std::logic_error.
  Counter& counter(std::string_view name);
  Gauge& gauge(std::string_view name);
  Histogram& histogram(std::string_view name);

  MetricsSnapshot snapshot() const;

  // {"counters": {...}, "gauges": {name: {"value", "max"}}, "histograms": {name: {"count",
  // "sum", "min", "max", "mean", "p50", "p90", "p99"}}}
  std::string to_json() const;
  // One line per metric, sorted by name, for logs and the CLI.
  std::string to_text() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  void claim(std::string_view name, Kind kind);

  mutable std::mutex mu_;
  std::map<std::string, Kind, std::less<>> kinds_;
  std::map<std::string, std::unique_ptr<Counter>, std::less<>> counters_;
  std::map<std::string, std::unique_ptr<Gauge>, std::less<>> gauges_;
  std::map<std::string, std::unique_ptr<Histogram>, std::less<>> histograms_;
};

}  // namespace mmfeed::core
