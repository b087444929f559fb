// A timeline of what every thread did, written as Chrome-trace JSON
// ({"traceEvents": [...]}) that Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// Stages wrap units of work in TraceSpan; each becomes a complete ("X") event on its
// thread's track, with the thread's name. Counters (queue depth, bytes in flight) become "C"
// events drawn as graphs. The writer is bounded: past max_events it counts what it drops
// instead of growing without limit. A disabled writer costs one branch per span.
//
// Example:
//   TraceWriter trace;
//   {
//     TraceSpan span(&trace, "decode", "vision", "s3://bucket/cat.jpg");
//     decode(...);
//   }
//   trace.counter("prefetch.depth", 3);
//   auto status = trace.write_file("/tmp/mmfeed-trace.json");
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "mmfeed/error.h"

namespace mmfeed::core {

struct TraceOptions {
  bool enabled = true;
  std::size_t max_events = 1 << 20;
};

// Whether a file can be written at `path`: opened for writing (created empty when missing, an
// existing file left as it is). kIoError naming the path and the system's reason otherwise, so
// that a trace which could not be written is refused before the run, not found missing after it.
Status check_writable(const std::string& path);

class TraceWriter {
 public:
  explicit TraceWriter(TraceOptions options = {});

  bool enabled() const { return enabled_; }

  // A finished span of work on the calling thread. `detail` (a URI, a sample id) goes into
  // the event's args. Times are now_ns() values.
  void complete(std::string_view name, std::string_view category, std::int64_t start_ns, std::int64_t end_ns,
                std::string_view detail = {});
  // A point in time on the calling thread.
  void instant(std::string_view name, std::string_view category, std::string_view detail = {});
  // A sample of a named counter track, at now.
  void counter(std::string_view name, double value);

  std::size_t event_count() const;
  std::size_t dropped_count() const { return dropped_.load(std::memory_order_relaxed); }

  // The whole trace, with thread-name metadata for every thread that recorded.
  std::string to_json() const;
  // Writes to_json() to `path`; kIoError naming the path and the system's reason when it cannot
  // be opened or written whole (a missing folder, a directory, a full disk).
  Status write_file(const std::string& path) const;

 private:
  struct Event {
    char phase;
    std::string name;
    std::string category;
    std::string detail;
    std::int64_t ts_ns;
    std::int64_t dur_ns;
    double value;
    int tid;
  };
  void add(Event event);

  const bool enabled_;
  const std::size_t max_events_;
  const std::int64_t origin_ns_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<std::pair<int, std::string>> threads_;  // tid -> name, as first seen
  std::atomic<std::size_t> dropped_{0};
};

// Records [construction, destruction) as a complete event. A null or disabled writer makes
// it a no-op.
class TraceSpan {
 public:
  TraceSpan(TraceWriter* writer, std::string_view name, std::string_view category, std::string_view detail = {})
      : writer_(writer != nullptr && writer->enabled() ? writer : nullptr),
        name_(name),
        category_(category),
        detail_(detail),
        start_ns_(writer_ != nullptr ? now_ns() : 0) {}
  ~TraceSpan() {
    if (writer_ != nullptr) writer_->complete(name_, category_, start_ns_, now_ns(), detail_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceWriter* writer_;
  std::string_view name_;
  std::string_view category_;
  std::string_view detail_;
  std::int64_t start_ns_;
};

}  // namespace mmfeed::core
