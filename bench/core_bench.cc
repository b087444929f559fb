// Microbenchmarks for the core runtime's hot paths: what a stage pays per item for its queue,
// its metrics and its buffers. Run: build/core_bench (or `make bench`).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "core/bounded_queue.h"
#include "core/buffer_pool.h"
#include "core/metrics.h"
#include "core/scratch.h"
#include "core/trace.h"

namespace mmfeed::core {
namespace {

void BM_QueuePushPopSameThread(benchmark::State& state) {
  BoundedQueue<int> q(1024);
  for (auto _ : state) {
    (void)q.push(1);
    benchmark::DoNotOptimize(q.pop());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_QueuePushPopSameThread);

// One producer thread, one consumer thread, through a queue of the given capacity.
void BM_QueueProducerConsumer(benchmark::State& state) {
  const auto capacity = static_cast<std::size_t>(state.range(0));
  constexpr int kItems = 200000;
  for (auto _ : state) {
    BoundedQueue<int> q(capacity);
    std::thread producer([&] {
      for (int i = 0; i < kItems; ++i) (void)q.push(int(i));
      q.close();
    });
    long sum = 0;
    while (auto v = q.pop()) sum += *v;
    producer.join();
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * kItems);
}
BENCHMARK(BM_QueueProducerConsumer)->Arg(4)->Arg(64)->Arg(1024)->UseRealTime();

void BM_HistogramRecord(benchmark::State& state) {
  Histogram h;
  std::uint64_t v = 12345;
  for (auto _ : state) {
    h.record(v);
    v = v * 6364136223846793005ULL + 1442695040888963407ULL;
    v >>= 40;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HistogramRecord);

void BM_CounterAdd(benchmark::State& state) {
  MetricsRegistry m;
  Counter& c = m.counter("n");
  for (auto _ : state) c.add();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterAdd);

// A 1 MiB buffer from the pool (reused) versus from the heap (fresh, first-touched).
void BM_BufferPoolAcquire1MiB(benchmark::State& state) {
  BufferPool pool;
  for (auto _ : state) {
    Buffer b = pool.acquire(1 << 20);
    b.data()[0] = std::byte{1};
    b.data()[(1 << 20) - 1] = std::byte{1};
    benchmark::DoNotOptimize(b.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BufferPoolAcquire1MiB);

void BM_HeapAlloc1MiB(benchmark::State& state) {
  for (auto _ : state) {
    auto* p = static_cast<std::byte*>(::operator new(1 << 20, std::align_val_t(64)));
    p[0] = std::byte{1};
    p[(1 << 20) - 1] = std::byte{1};
    benchmark::DoNotOptimize(p);
    ::operator delete(p, std::align_val_t(64));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HeapAlloc1MiB);

// A decoded 12 MP photo's worth of pixels (36 MB), written in full: a scratch vector (pooled,
// not zero-filled) versus a std::vector (above glibc's 32 MB mmap ceiling: a fresh mapping
// each time, faulted in, zero-filled, then written).
template <class Vector>
void write_pixels(benchmark::State& state) {
  const std::size_t bytes = std::size_t{4000} * 3000 * 3;
  for (auto _ : state) {
    Vector v(bytes);
    std::memset(v.data(), 7, v.size());
    benchmark::DoNotOptimize(v.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
void BM_ScratchVectorPixels(benchmark::State& state) { write_pixels<ScratchVector<std::uint8_t>>(state); }
BENCHMARK(BM_ScratchVectorPixels);
void BM_StdVectorPixels(benchmark::State& state) { write_pixels<std::vector<std::uint8_t>>(state); }
BENCHMARK(BM_StdVectorPixels);

void BM_TraceSpan(benchmark::State& state) {
  TraceWriter trace({.enabled = state.range(0) != 0, .max_events = 1 << 24});
  for (auto _ : state) {
    TraceSpan span(&trace, "decode", "vision");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TraceSpan)->Arg(0)->Arg(1);

}  // namespace
}  // namespace mmfeed::core

BENCHMARK_MAIN();
