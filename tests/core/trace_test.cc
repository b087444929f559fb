#include "core/trace.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "mmfeed/json.h"

namespace mmfeed::core {
namespace {

simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& json) {
  simdjson::dom::element doc;
  EXPECT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json.substr(0, 500);
  return doc;
}

TEST(TraceWriterTest, WritesValidChromeTraceJson) {
  TraceWriter trace;
  {
    TraceSpan span(&trace, "decode", "vision", "s3://bucket/cat.jpg");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  trace.instant("epoch", "loader");
  trace.counter("prefetch.depth", 3);

  simdjson::dom::parser parser;
  auto doc = parse(parser, trace.to_json());
  simdjson::dom::array events;
  ASSERT_EQ(doc["traceEvents"].get_array().get(events), simdjson::SUCCESS);

  std::map<std::string, simdjson::dom::object> by_phase;
  for (simdjson::dom::element e : events) {
    by_phase[std::string(std::string_view(e["ph"]))] = e.get_object();
  }
  ASSERT_EQ(by_phase.count("X"), 1u);
  ASSERT_EQ(by_phase.count("i"), 1u);
  ASSERT_EQ(by_phase.count("C"), 1u);
  ASSERT_EQ(by_phase.count("M"), 1u);

  auto span = by_phase["X"];
  EXPECT_EQ(std::string_view(span["name"]), "decode");
  EXPECT_EQ(std::string_view(span["cat"]), "vision");
  EXPECT_EQ(std::string_view(span["args"]["detail"]), "s3://bucket/cat.jpg");
  EXPECT_GE(double(span["dur"]), 2000.0);  // microseconds
  EXPECT_GE(double(span["ts"]), 0.0);
  EXPECT_EQ(int64_t(span["pid"]), getpid());
  EXPECT_EQ(double(by_phase["C"]["args"]["value"]), 3.0);
  EXPECT_EQ(std::string_view(by_phase["M"]["name"]), "thread_name");
}

TEST(TraceWriterTest, EachThreadGetsANamedTrack) {
  TraceWriter trace;
  ThreadPool pool("fetch", 3);
  for (int i = 0; i < 30; ++i) {
    pool.submit([&] {
      TraceSpan span(&trace, "get", "storage");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  pool.wait_idle();
  { TraceSpan span(&trace, "main-work", "test"); }

  simdjson::dom::parser parser;
  auto doc = parse(parser, trace.to_json());
  std::map<int64_t, std::string> thread_names;
  std::set<int64_t> span_tids;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    const std::string_view ph = e["ph"];
    if (ph == "M") thread_names[int64_t(e["tid"])] = std::string(std::string_view(e["args"]["name"]));
    if (ph == "X") span_tids.insert(int64_t(e["tid"]));
  }
  EXPECT_EQ(trace.event_count(), 31u);
  for (int64_t tid : span_tids) EXPECT_EQ(thread_names.count(tid), 1u) << "tid " << tid << " unnamed";
  int fetch_threads = 0;
  for (const auto& [tid, name] : thread_names) fetch_threads += name.rfind("fetch-", 0) == 0;
  EXPECT_GE(fetch_threads, 1);
  EXPECT_LE(fetch_threads, 3);
}

TEST(TraceWriterTest, EscapesHostileNamesAndStaysValid) {
  TraceWriter trace;
  const std::string nasty =
      std::string("quote\" back\\slash\nnew\tline \x01 ctrl ") + "\xff\xfe" + " bad utf8 " + "\xe4\xb8\xad\xe6\x96\x87";
  trace.complete(nasty, "cat", now_ns(), now_ns() + 10, nasty);
  simdjson::dom::parser parser;
  auto doc = parse(parser, trace.to_json());
  bool found = false;
  for (simdjson::dom::element e : doc["traceEvents"].get_array()) {
    if (std::string_view(e["ph"]) != "X") continue;
    const std::string_view name = e["name"];
    EXPECT_NE(name.find("quote\" back\\slash\nnew\tline \x01 ctrl "), std::string_view::npos);
    EXPECT_NE(name.find("\xef\xbf\xbd\xef\xbf\xbd bad utf8 \xe4\xb8\xad\xe6\x96\x87"), std::string_view::npos);
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(TraceWriterTest, DisabledWriterRecordsNothing) {
  TraceWriter trace({.enabled = false});
  { TraceSpan span(&trace, "decode", "vision"); }
  trace.counter("x", 1);
  TraceSpan null_span(nullptr, "nothing", "test");
  EXPECT_EQ(trace.event_count(), 0u);
}

TEST(TraceWriterTest, BoundedByMaxEvents) {
  TraceWriter trace({.max_events = 10});
  for (int i = 0; i < 25; ++i) trace.instant("tick", "test");
  EXPECT_EQ(trace.event_count(), 10u);
  EXPECT_EQ(trace.dropped_count(), 15u);
}

TEST(TraceWriterTest, WriteFileRoundTripsAndReportsBadPaths) {
  TraceWriter trace;
  trace.instant("hello", "test");
  const auto path = std::filesystem::temp_directory_path() / ("mmfeed-trace-" + std::to_string(getpid()) + ".json");
  ASSERT_TRUE(trace.write_file(path.string()).ok());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.load(path.string()).get(doc), simdjson::SUCCESS);
  EXPECT_EQ(doc["traceEvents"].get_array().size(), 2u);  // thread name + instant
  std::filesystem::remove(path);

  Status bad = trace.write_file("/nonexistent-dir/trace.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::kIoError);
  EXPECT_EQ(bad.error().context(), "/nonexistent-dir/trace.json");
}

// Issue 31: a trace lost to a full disk was reported as written.
TEST(TraceWriterTest, AWriteTheDiskRefusesIsAnError) {
  TraceWriter trace;
  trace.instant("hello", "test");
  Status full = trace.write_file("/dev/full");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), ErrorCode::kIoError);
  EXPECT_EQ(full.error().to_string(), "/dev/full: the trace file was not written whole: No space left on device");
}

TEST(TraceWriterTest, APathThatCannotBeWrittenIsFoundBeforeTheRun) {
  EXPECT_TRUE(check_writable("/dev/full").ok());  // opens: only a write finds it full
  const Status dir = check_writable(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message().find("Is a directory"), std::string::npos) << dir.error().to_string();
  EXPECT_FALSE(check_writable("/nonexistent-dir/trace.json").ok());
}

TEST(JsonStringTest, ValidUtf8PassesThroughUnchanged) {
  std::string out;
  append_json_string(out, "emoji \xf0\x9f\x98\x80 arabic \xd8\xb9");
  EXPECT_EQ(out, "\"emoji \xf0\x9f\x98\x80 arabic \xd8\xb9\"");
  out.clear();
  append_json_string(out, "\xed\xa0\x80");  // a UTF-16 surrogate encoded in UTF-8 is invalid
  EXPECT_EQ(out, "\"\\ufffd\\ufffd\\ufffd\"");
}

}  // namespace
}  // namespace mmfeed::core
