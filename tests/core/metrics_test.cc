#include "core/metrics.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

namespace mmfeed::core {
namespace {

TEST(HistogramTest, BucketsTileTheRangeWithoutGaps) {
  for (std::size_t i = 0; i + 1 < Histogram::kBuckets; ++i) {
    EXPECT_EQ(Histogram::bucket_high(i) + 1, Histogram::bucket_low(i + 1)) << i;
    EXPECT_EQ(Histogram::bucket_index(Histogram::bucket_low(i)), i);
    EXPECT_EQ(Histogram::bucket_index(Histogram::bucket_high(i)), i);
  }
  EXPECT_EQ(Histogram::bucket_index(UINT64_MAX), Histogram::kBuckets - 1);
  EXPECT_EQ(Histogram::bucket_high(Histogram::kBuckets - 1), UINT64_MAX);
}

TEST(HistogramTest, PercentilesWithinBucketPrecisionOfExact) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(15.0, 1.5);  // ~ns latencies around 3 ms
  Histogram h;
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 100000; ++i) {
    const auto v = static_cast<std::uint64_t>(dist(rng));
    values.push_back(v);
    h.record(v);
  }
  std::sort(values.begin(), values.end());
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.count, values.size());
  EXPECT_EQ(s.min, values.front());
  EXPECT_EQ(s.max, values.back());
  for (double q : {0.01, 0.1, 0.5, 0.9, 0.99, 0.999}) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
    const double exact = static_cast<double>(values[rank - 1]);
    const double got = static_cast<double>(s.percentile(q));
    EXPECT_LE(std::abs(got - exact) / exact, 1.0 / 32) << "q=" << q;
  }
  EXPECT_EQ(s.percentile(1.0), values.back());
}

TEST(HistogramTest, SmallValuesAreExact) {
  Histogram h;
  for (std::uint64_t v : {3, 1, 4, 1, 5, 9, 2, 6}) h.record(v);
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.percentile(0.5), 3u);
  EXPECT_EQ(s.min, 1u);
  EXPECT_EQ(s.max, 9u);
  EXPECT_EQ(s.sum, 31u);
}

TEST(HistogramTest, EmptyHistogramReportsZeros) {
  Histogram h;
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.percentile(0.99), 0u);
  EXPECT_EQ(s.min, 0u);
}

TEST(MetricsRegistryTest, SameNameSameMetric) {
  MetricsRegistry m;
  m.counter("fetch.objects").add(2);
  m.counter("fetch.objects").add(3);
  EXPECT_EQ(m.counter("fetch.objects").value(), 5);
  EXPECT_EQ(&m.gauge("q.depth"), &m.gauge("q.depth"));
}

TEST(MetricsRegistryTest, OneNameOneKind) {
  MetricsRegistry m;
  m.counter("x");
  EXPECT_THROW(m.gauge("x"), std::logic_error);
  EXPECT_THROW(m.histogram("x"), std::logic_error);
}

TEST(MetricsRegistryTest, GaugeRemembersItsMaximum) {
  MetricsRegistry m;
  Gauge& g = m.gauge("inflight");
  g.add(5);
  g.add(3);
  g.add(-6);
  g.set(1);
  EXPECT_EQ(g.value(), 1);
  EXPECT_EQ(g.max(), 8);
}

TEST(MetricsRegistryTest, ConcurrentRecordingLosesNothing) {
  MetricsRegistry m;
  Counter& c = m.counter("n");
  Histogram& h = m.histogram("lat");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        c.add();
        h.record(static_cast<std::uint64_t>(i));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 200000);
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.count, 200000u);
  EXPECT_EQ(s.sum, 4ull * (49999ull * 50000ull / 2));
  EXPECT_EQ(s.max, 49999u);
}

TEST(MetricsRegistryTest, JsonParsesBackWithTheValues) {
  MetricsRegistry m;
  m.counter("fetch.objects").add(12);
  m.gauge("queue \"depth\"").set(4);
  for (std::uint64_t v = 1; v <= 100; ++v) m.histogram("fetch.latency_ns").record(v * 1000);

  const std::string json = m.to_json();
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(int64_t(doc["counters"]["fetch.objects"]), 12);
  EXPECT_EQ(int64_t(doc["gauges"]["queue \"depth\""]["value"]), 4);
  auto hist = doc["histograms"]["fetch.latency_ns"];
  EXPECT_EQ(uint64_t(hist["count"]), 100u);
  EXPECT_EQ(uint64_t(hist["max"]), 100000u);
  EXPECT_NEAR(double(uint64_t(hist["p50"])), 50000.0, 50000.0 / 32);

  const std::string text = m.to_text();
  EXPECT_NE(text.find("fetch.objects 12\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fetch.latency_ns count=100"), std::string::npos) << text;
}

}  // namespace
}  // namespace mmfeed::core
