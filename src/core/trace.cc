#include "core/trace.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mmfeed/json.h"

namespace mmfeed::core {

namespace {

// Small, stable per-thread ids: Perfetto draws one track per tid.
int current_tid() {
  static std::atomic<int> next{1};
  thread_local const int tid = next.fetch_add(1, std::memory_order_relaxed);
  return tid;
}

std::string current_thread_name() {
  char name[32] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0 || name[0] == '\0') {
    return "thread-" + std::to_string(current_tid());
  }
  return name;
}

void append_micros(std::string& out, std::int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
  out += buf;
}

}  // namespace

TraceWriter::TraceWriter(TraceOptions options)
    : enabled_(options.enabled), max_events_(options.max_events), origin_ns_(now_ns()) {}

void TraceWriter::add(Event event) {
  std::lock_guard lock(mu_);
  if (events_.size() >= max_events_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  bool known = false;
  for (const auto& [tid, name] : threads_) known = known || tid == event.tid;
  if (!known) threads_.emplace_back(event.tid, current_thread_name());
  events_.push_back(std::move(event));
}

void TraceWriter::complete(std::string_view name, std::string_view category, std::int64_t start_ns, std::int64_t end_ns,
                           std::string_view detail) {
  if (!enabled_) return;
  add(Event{'X', std::string(name), std::string(category), std::string(detail), start_ns, end_ns - start_ns, 0.0,
            current_tid()});
}

void TraceWriter::instant(std::string_view name, std::string_view category, std::string_view detail) {
  if (!enabled_) return;
  add(Event{'i', std::string(name), std::string(category), std::string(detail), now_ns(), 0, 0.0, current_tid()});
}

void TraceWriter::counter(std::string_view name, double value) {
  if (!enabled_) return;
  add(Event{'C', std::string(name), "counter", {}, now_ns(), 0, value, current_tid()});
}

std::size_t TraceWriter::event_count() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

std::string TraceWriter::to_json() const {
  std::lock_guard lock(mu_);
  const std::string pid = std::to_string(getpid());
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  const char* sep = "";
  for (const auto& [tid, name] : threads_) {
    out += sep;
    out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) +
           ",\"args\":{\"name\":";
    append_json_string(out, name);
    out += "}}";
    sep = ",";
  }
  for (const Event& e : events_) {
    out += sep;
    sep = ",";
    out += "{\"ph\":\"";
    out += e.phase;
    out += "\",\"name\":";
    append_json_string(out, e.name);
    out += ",\"cat\":";
    append_json_string(out, e.category);
    out += ",\"pid\":" + pid + ",\"tid\":" + std::to_string(e.tid) + ",\"ts\":";
    append_micros(out, e.ts_ns - origin_ns_);
    switch (e.phase) {
      case 'X':
        out += ",\"dur\":";
        append_micros(out, e.dur_ns);
        break;
      case 'i': out += ",\"s\":\"t\""; break;
      case 'C': {
        char value[40];
        std::snprintf(value, sizeof value, "%.17g", e.value);
        out += ",\"args\":{\"value\":";
        out += value;
        out += "}";
        break;
      }
    }
    if (!e.detail.empty()) {
      out += ",\"args\":{\"detail\":";
      append_json_string(out, e.detail);
      out += "}";
    }
    out += "}";
  }
  out += "]}";
  return out;
}

Status check_writable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Error(ErrorCode::kIoError, std::string("cannot write the trace: ") + std::strerror(errno), path);
  ::close(fd);
  return ok_status();
}

Status TraceWriter::write_file(const std::string& path) const {
  const std::string json = to_json();
  auto failed = [&](const char* what) {
    return Error(ErrorCode::kIoError, std::string(what) + std::strerror(errno), path);
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failed("cannot open the trace file: ");
  for (std::size_t done = 0; done < json.size();) {
    const ssize_t n = ::write(fd, json.data() + done, json.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      Error error = failed("the trace file was not written whole: ");
      ::close(fd);
      return error;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) return failed("the trace file was not written whole: ");
  return ok_status();
}

}  // namespace mmfeed::core
