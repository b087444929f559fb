// The fetch engine's I/O thread: curl set-up, response parsing and checks, deadlines and hedging,
// error classification and retries, multipart planning. Over 600 lines because these act on one
// Transfer/Job state machine owned by the I/O thread; splitting out the pure parts (the response
// checks and the error classification, each with its own tests) is open work of issue 17. Local
// reads are already apart (file_reader.*).
#include "storage/fetcher.h"

#include <curl/curl.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <vector>

#include "core/bounded_queue.h"
#include "core/clock.h"
#include "core/strings.h"
#include "core/thread_pool.h"
#include "storage/file_reader.h"
#include "storage/s3.h"

namespace mmfeed::storage {

namespace {

constexpr std::uint64_t kUnknown = UINT64_MAX;
constexpr std::size_t kMaxErrorBody = 16 << 10;
constexpr long kMaxRedirects = 5;

// libcurl's process-wide initialisation, done once before the first handle.
void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

struct Job;

// One HTTP GET on the wire: the whole object, its first part (a probe that learns the size),
// a later part, or a hedge.
struct Transfer {
  Fetcher::Engine* engine = nullptr;
  Job* job = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  int part = -1;      // -1: whole object or probe; else the part index
  bool probe = false;
  bool hedge = false;
  std::uint64_t range_begin = 0;
  std::uint64_t range_end = kUnknown;  // inclusive; kUnknown: no Range header
  std::int64_t start_ns = 0;
  std::int64_t first_byte_ns = 0;
  std::int64_t last_byte_ns = 0;
  long status = 0;
  std::uint64_t content_length = kUnknown;
  std::uint64_t range_total = kUnknown;  // from Content-Range: bytes a-b/total
  std::uint64_t range_first = kUnknown;
  std::uint64_t range_last = kUnknown;
  std::string etag;
  bool checked = false;         // the 2xx answer's headers were checked (prepare_destination)
  bool object_changed = false;  // a part came from another version of the object than the probe
  core::Buffer own;           // whole-object transfers write here
  std::byte* dest = nullptr;  // where body bytes go
  std::uint64_t dest_size = 0;
  std::uint64_t received = 0;
  bool grow = false;  // no length known: own buffer grows
  std::string error_body;
  std::string local_failure;  // set when our own callbacks abort the transfer ...
  ErrorCode local_failure_code = ErrorCode::kIoError;  // ... and its code, unless it timed out
  char errbuf[CURL_ERROR_SIZE] = {};
};

struct Job {
  FetchRequest request;
  std::string uri_text;
  std::int64_t start_ns = 0;
  int attempts = 0;  // GETs sent
  int failures = 0;  // failed attempts of the whole-object request, counted against max_attempts
  std::map<int, int> part_failures;  // the same per part of a large object
  int retries = 0;
  int last_status = 0;
  bool no_probe = false;  // the server refused the probe range (empty object)
  // Multipart state.
  bool multipart = false;
  std::uint64_t total = kUnknown;
  std::string etag;
  core::Buffer buffer;
  std::size_t parts = 0;
  std::size_t parts_done = 0;
  bool hedged = false;
  std::vector<Transfer*> transfers;  // active ones
};

// A transfer to start at `due_ns` (a retry) or now (a part waiting for a slot).
struct PendingStart {
  std::int64_t due_ns;
  Job* job;
  int part;  // -1: the whole object / probe
  bool operator>(const PendingStart& o) const { return due_ns > o.due_ns; }
};

class Fetcher::Engine {
 public:
  Engine(const FetchOptions& options, const S3Options& s3, core::MetricsRegistry* metrics,
         core::TraceWriter* trace)
      : options_(options),
        s3_(s3),
        trace_(trace),
        submitted_(std::max<std::size_t>(1, options.queue_capacity)),
        completions_(std::max<std::size_t>(1, options.max_pending_results + options.queue_capacity)),
        rng_(options.seed) {
    init_curl_once();
    ca_file_ = options_.ca_file.empty() ? process_env("AWS_CA_BUNDLE").value_or("") : options_.ca_file;
    metrics_ = metrics != nullptr ? metrics : &own_metrics_;
    m_requests_ = &metrics_->counter("fetch.requests");
    m_ok_ = &metrics_->counter("fetch.objects_ok");
    m_failed_ = &metrics_->counter("fetch.objects_failed");
    m_retries_ = &metrics_->counter("fetch.retries");
    m_hedges_ = &metrics_->counter("fetch.hedges");
    m_hedge_wins_ = &metrics_->counter("fetch.hedge_wins");
    m_bytes_ = &metrics_->counter("fetch.bytes");
    m_latency_ = &metrics_->histogram("fetch.latency_ns");
    m_ttfb_ = &metrics_->histogram("fetch.first_byte_ns");
    m_inflight_ = &metrics_->gauge("fetch.inflight");
    m_inflight_bytes_ = &metrics_->gauge("fetch.inflight_bytes");

    share_ = curl_share_init();
    curl_share_setopt(share_, CURLSHOPT_LOCKFUNC, &Engine::lock_share);
    curl_share_setopt(share_, CURLSHOPT_UNLOCKFUNC, &Engine::unlock_share);
    curl_share_setopt(share_, CURLSHOPT_USERDATA, this);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(options_.max_inflight));
    files_ = std::make_unique<FileReader>(options_.local_threads, pool_, [multi = multi_] { curl_multi_wakeup(multi); });
    thread_ = std::thread([this] { run(); });
  }

  ~Engine() {
    cancel();
    if (thread_.joinable()) thread_.join();
    files_.reset();  // before the multi handle goes: its readers wake the I/O thread through it
    curl_multi_cleanup(multi_);
    curl_share_cleanup(share_);
  }

  bool submit(FetchRequest request) {
    if (!submitted_.push(std::move(request))) return false;
    curl_multi_wakeup(multi_);
    return true;
  }

  std::optional<FetchResult> next() {
    auto r = completions_.pop();
    wake_if_waiting_for_consumer();
    return r;
  }

  std::optional<FetchResult> next_for(std::chrono::milliseconds timeout) {
    auto r = completions_.pop_for(timeout);
    if (r) wake_if_waiting_for_consumer();
    return r;
  }

  void close() {
    submitted_.close();
    curl_multi_wakeup(multi_);
  }

  void cancel() {
    cancelled_.store(true);
    submitted_.close();
    curl_multi_wakeup(multi_);
  }

 private:
  // A taken result frees a slot only when admission is blocked on untaken results; waking the
  // I/O thread on every pop would cost a syscall per object for nothing.
  void wake_if_waiting_for_consumer() {
    if (waiting_for_consumer_.exchange(false)) curl_multi_wakeup(multi_);
  }

  static void lock_share(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<Engine*>(self)->share_locks_[static_cast<std::size_t>(data) % kShareLocks].lock();
  }
  static void unlock_share(CURL*, curl_lock_data data, void* self) {
    static_cast<Engine*>(self)->share_locks_[static_cast<std::size_t>(data) % kShareLocks].unlock();
  }

  // ---- the I/O thread ------------------------------------------------------------------
  void run() {
    core::set_current_thread_name("fetch-io");
    while (true) {
      const std::int64_t now = core::now_ns();
      collect_local_results();
      if (cancelled_.load()) {
        cancel_everything();
        break;
      }
      start_due(now);
      admit_new_jobs(now);
      check_deadlines_and_hedges(now);
      int running = 0;
      curl_multi_perform(multi_, &running);
      const std::uint64_t finished = finished_transfers_;
      process_completions();
      if (submitted_.closed() && submitted_.size() == 0 && active_jobs_ == 0 && local_jobs_.empty()) break;
      // A transfer that just finished freed a slot, or queued a part or a retry: start what can
      // start now instead of sleeping until the next event or the 50 ms tick.
      if (finished_transfers_ != finished) continue;
      curl_multi_poll(multi_, nullptr, 0, poll_timeout_ms(core::now_ns()), nullptr);
    }
    completions_.close();
  }

  int poll_timeout_ms(std::int64_t now) const {
    std::int64_t wait_ns = 50'000'000;  // deadlines and hedges are checked at least every 50 ms
    if (!retries_.empty()) wait_ns = std::min(wait_ns, retries_.top().due_ns - now);
    return static_cast<int>(std::clamp<std::int64_t>(wait_ns / 1'000'000, 0, 50));
  }

  std::size_t transfers_active() const { return transfers_.size(); }

  // Jobs in flight plus results not yet taken stay under max_pending_results.
  bool room_for_job() {
    // Raise the flag before looking, so a result taken after the look always wakes us.
    waiting_for_consumer_.store(true);
    if (static_cast<std::size_t>(active_jobs_) + local_jobs_.size() + completions_.size() >= options_.max_pending_results) {
      return false;
    }
    waiting_for_consumer_.store(false);
    return transfers_active() < options_.max_inflight && inflight_bytes_ < options_.max_inflight_bytes &&
           ready_parts_.empty();
  }

  void admit_new_jobs(std::int64_t now) {
    while (room_for_job()) {
      auto request = submitted_.try_pop();
      if (!request) break;
      auto job = std::make_unique<Job>();
      job->request = std::move(*request);
      job->uri_text = job->request.uri.to_string();
      job->start_ns = now;
      Job* j = job.get();
      jobs_.push_back(std::move(job));
      if (j->request.uri.scheme == Scheme::kFile) {
        start_local(j);
      } else if (j->request.uri.scheme == Scheme::kS3 && j->request.uri.key.empty()) {
        // A GET of "s3://bucket/" is a ListObjects call: its XML would pass for the object.
        ++active_jobs_;
        fail_job(j, Error(ErrorCode::kInvalidArgument,
                          "an S3 object URI needs a key (s3://bucket/ names a bucket; to fetch what is in it, "
                          "list it: mmfeed fetch s3://bucket/prefix/)",
                          j->uri_text));
      } else {
        ++active_jobs_;
        start_transfer(j, -1, false);
      }
    }
  }

  void start_due(std::int64_t now) {
    while (!ready_parts_.empty() && transfers_active() < options_.max_inflight) {
      const PendingStart p = ready_parts_.front();
      ready_parts_.pop_front();
      start_transfer(p.job, p.part, false);
    }
    while (!retries_.empty() && retries_.top().due_ns <= now && transfers_active() < options_.max_inflight) {
      const PendingStart p = retries_.top();
      retries_.pop();
      start_transfer(p.job, p.part, false);
    }
  }

  // ---- local files ---------------------------------------------------------------------
  void start_local(Job* job) {
    const std::uint64_t id = next_local_id_++;
    local_jobs_.emplace(id, job);
    job->attempts = 1;
    FileRead read{.id = id, .path = job->request.uri.path, .uri = job->uri_text, .max_bytes = options_.max_object_bytes};
    if (job->request.range) {
      read.offset = job->request.range->offset;
      read.length = job->request.range->length;
    }
    files_->submit(std::move(read), options_.attempt_timeout_ms);
  }

  // Delivers the local reads that finished, and those whose deadline passed as kTimeout.
  void collect_local_results() {
    for (auto& [id, data] : files_->take_done()) {
      const auto it = local_jobs_.find(id);
      Job* job = it->second;
      local_jobs_.erase(it);
      FetchResult r = base_result(job);
      r.data = std::move(data);
      deliver(job, std::move(r));
    }
  }

  // ---- HTTP transfers ------------------------------------------------------------------
  void start_transfer(Job* job, int part, bool hedge) {
    auto* t = new Transfer();
    t->engine = this;
    t->job = job;
    t->part = part;
    t->hedge = hedge;
    t->start_ns = core::now_ns();
    const ObjectUri& uri = job->request.uri;

    std::vector<std::pair<std::string, std::string>> extra;
    if (job->request.range) {
      t->range_begin = job->request.range->offset;
      t->range_end = job->request.range->offset + std::max<std::uint64_t>(job->request.range->length, 1) - 1;
    } else if (part >= 0) {
      t->range_begin = static_cast<std::uint64_t>(part) * options_.part_size;
      t->range_end = std::min<std::uint64_t>(job->total, t->range_begin + options_.part_size) - 1;
      t->dest = job->buffer.data() + t->range_begin;
      t->dest_size = t->range_end - t->range_begin + 1;
      if (!job->etag.empty()) extra.emplace_back("if-match", job->etag);
    } else if (options_.part_size > 0 && !job->no_probe && !hedge) {
      t->probe = true;
      t->range_begin = 0;
      t->range_end = options_.part_size - 1;
    }
    if (t->range_end != kUnknown) {
      extra.emplace_back("range", "bytes=" + std::to_string(t->range_begin) + "-" + std::to_string(t->range_end));
    }

    HttpRequest req;
    if (uri.scheme == Scheme::kS3) {
      req = s3_request(s3_, "GET", uri.bucket, uri.key, {}, extra);
    } else {
      req.url = uri.url;
      req.headers = extra;
    }

    CURL* e = curl_easy_init();
    t->easy = e;
    curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_SHARE, share_);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);  // keys like "a/../b" are names, not paths
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.attempt_timeout_ms));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options_.low_speed_bytes_per_s));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.low_speed_time_s));
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, options_.verify_tls ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, options_.verify_tls ? 2L : 0L);
    if (!ca_file_.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, ca_file_.c_str());
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L << 10);  // fewer, larger reads per object
    curl_easy_setopt(e, CURLOPT_USERAGENT, "mmfeed/0.1");
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Engine::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Engine::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    // A proxy's "200 Connection established" would pass for the answer's headers in on_header.
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    if (uri.scheme != Scheme::kS3) {
      curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
      curl_easy_setopt(e, CURLOPT_MAXREDIRS, kMaxRedirects);
    }
    for (const auto& [name, value] : req.headers) {
      t->headers = curl_slist_append(t->headers, (name + ": " + value).c_str());
    }
    t->headers = curl_slist_append(t->headers, "Expect:");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);

    ++job->attempts;
    job->transfers.push_back(t);
    transfers_.push_back(t);
    m_requests_->add();
    m_inflight_->set(static_cast<std::int64_t>(transfers_.size()));
    curl_multi_add_handle(multi_, e);
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t len = size * n;
    const std::string_view line(data, len);
    t->last_byte_ns = core::now_ns();
    if (t->first_byte_ns == 0) t->first_byte_ns = t->last_byte_ns;
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (redirects, 100 Continue)
      t->status = 0;
      t->content_length = kUnknown;
      t->range_total = t->range_first = t->range_last = kUnknown;
      t->etag.clear();
      const auto sp = line.find(' ');
      if (sp != std::string_view::npos) t->status = std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
      return len;
    }
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) {
      if (!core::trim(line).empty()) return len;
      // The end of a 2xx answer's headers: check it and take memory for its body now, before a
      // body byte arrives (an object over the size limit is refused before it costs anything).
      if (t->status >= 200 && t->status < 300 && !t->checked && !t->engine->prepare_destination(t)) return 0;
      return len;
    }
    const std::string name = core::ascii_lower(core::trim(line.substr(0, colon)));
    const std::string value = core::trim(line.substr(colon + 1));
    if (name == "content-length") {
      t->content_length = parse_u64(value).value_or(kUnknown);
    } else if (name == "etag") {
      t->etag = value;
    } else if (name == "content-range") {
      // bytes FIRST-LAST/TOTAL
      const auto space = value.find(' ');
      const auto dash = value.find('-');
      const auto slash = value.find('/');
      if (space != std::string::npos && dash != std::string::npos && slash != std::string::npos) {
        t->range_first = parse_u64(std::string_view(value).substr(space + 1, dash - space - 1)).value_or(kUnknown);
        t->range_last = parse_u64(std::string_view(value).substr(dash + 1, slash - dash - 1)).value_or(kUnknown);
        t->range_total = parse_u64(std::string_view(value).substr(slash + 1)).value_or(kUnknown);
      }
    }
    return len;
  }

  // Checks a 2xx answer against what was asked (once, at the end of its headers) and
  // decides where the body goes. A 206 must carry a Content-Range for exactly the bytes asked
  // (clipped to the object's end), and a part the probe's ETag: otherwise the bytes would land
  // at the wrong offset or mix two versions of the object.
  bool prepare_destination(Transfer* t) {
    t->checked = true;
    Job* job = t->job;
    const auto mismatch = [t](const std::string& what) {
      t->local_failure = what + " (asked bytes=" + std::to_string(t->range_begin) + "-" +
                         (t->range_end == kUnknown ? std::string() : std::to_string(t->range_end)) + ", got status " +
                         std::to_string(t->status) + (t->range_first == kUnknown ? ", no usable Content-Range)" :
                         ", Content-Range bytes " + std::to_string(t->range_first) + "-" +
                         std::to_string(t->range_last) + "/" + std::to_string(t->range_total) + ")");
      return false;
    };
    if (t->status == 206) {
      if (t->range_first == kUnknown || t->range_last == kUnknown || t->range_total == kUnknown ||
          t->range_last < t->range_first || t->range_last >= t->range_total) {
        return mismatch("206 answer without a valid Content-Range");
      }
      if (t->range_end != kUnknown) {
        const std::uint64_t last = std::min(t->range_end, t->range_total - 1);
        if (t->range_first != t->range_begin || t->range_last != last) {
          return mismatch("206 answer for other bytes than asked");
        }
      }
      if (t->content_length != kUnknown && t->content_length != t->range_last - t->range_first + 1) {
        return mismatch("Content-Length " + std::to_string(t->content_length) + " disagrees with Content-Range");
      }
    }
    if (t->part >= 0) {
      if (t->status != 206 || t->range_total != job->total) return mismatch("part answer does not match the request");
      if (!job->etag.empty() && t->etag != job->etag) {
        t->object_changed = true;
        t->local_failure_code = ErrorCode::kUnavailable;
        t->local_failure = "the object changed during the fetch (ETag " + job->etag + ", then " +
                           (t->etag.empty() ? std::string("none") : t->etag) + ")";
        return false;
      }
      return true;
    }
    if (t->probe && t->status == 206 && t->range_total > options_.part_size) {
      // A large object: allocate it whole; the probe fills part 0, parallel GETs the rest.
      if (!within_size_limit(t, t->range_total, "Content-Range total")) return false;
      if (!acquire(t, job->buffer, t->range_total)) return false;
      job->multipart = true;
      job->total = t->range_total;
      job->etag = t->etag;
      job->parts = static_cast<std::size_t>((job->total + options_.part_size - 1) / options_.part_size);
      note_bytes(static_cast<std::int64_t>(job->buffer.capacity()));
      t->part = 0;
      t->dest = job->buffer.data();
      t->dest_size = options_.part_size;
      for (std::size_t p = 1; p < job->parts; ++p) ready_parts_.push_back({0, job, static_cast<int>(p)});
      return true;
    }
    if (t->content_length != kUnknown) {
      if (!within_size_limit(t, t->content_length, "Content-Length")) return false;
      if (!acquire(t, t->own, t->content_length)) return false;
      note_bytes(static_cast<std::int64_t>(t->own.capacity()));
      t->dest = t->own.data();
      t->dest_size = t->content_length;
    } else {
      t->grow = true;
    }
    return true;
  }

  // Refuses, for good, a body of `bytes` (as `what` declares it) over max_object_bytes.
  bool within_size_limit(Transfer* t, std::uint64_t bytes, const char* what) {
    if (bytes <= options_.max_object_bytes) return true;
    t->local_failure_code = ErrorCode::kResourceExhausted;
    t->local_failure = std::string("object of ") + std::to_string(bytes) + " bytes (" + what +
                       ") exceeds the object size limit of " + std::to_string(options_.max_object_bytes) +
                       " bytes (raise max_object_bytes, --max-object-bytes)";
    return false;
  }

  // Memory from the pool, or the transfer's final failure: running out of memory is this
  // object's error, never the process's end (and no exception may cross libcurl's C frames).
  bool acquire(Transfer* t, core::Buffer& out, std::uint64_t bytes) {
    try {
      out = engine_pool().acquire(static_cast<std::size_t>(bytes));
      return true;
    } catch (const std::bad_alloc&) {
      t->local_failure_code = ErrorCode::kResourceExhausted;
      t->local_failure = "out of memory for a body of " + std::to_string(bytes) + " bytes";
      return false;
    }
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t len = size * n;
    t->last_byte_ns = core::now_ns();
    if (t->status < 200 || t->status >= 300) {
      const std::size_t keep = std::min(len, kMaxErrorBody - std::min(kMaxErrorBody, t->error_body.size()));
      t->error_body.append(data, keep);
      return len;
    }
    Engine* engine = t->engine;
    if (t->grow) {
      // A body of unknown length (chunked, or ended by closing the connection) is refused as
      // soon as it passes the limit, and its buffer never grows beyond the limit.
      if (!engine->within_size_limit(t, t->received + len, "received so far, no length declared")) return 0;
      if (t->received + len > t->own.capacity()) {
        const std::uint64_t want = std::min<std::uint64_t>(std::max<std::uint64_t>(t->own.capacity() * 2, t->received + len),
                                                           engine->options_.max_object_bytes);
        core::Buffer bigger;
        if (!engine->acquire(t, bigger, want)) return 0;
        if (t->received > 0) std::memcpy(bigger.data(), t->own.data(), t->received);
        engine->note_bytes(static_cast<std::int64_t>(bigger.capacity()) - static_cast<std::int64_t>(t->own.capacity()));
        t->own = std::move(bigger);
      }
      std::memcpy(t->own.data() + t->received, data, len);
      t->received += len;
      return len;
    }
    if (t->received + len > t->dest_size) {
      t->local_failure = "server sent more than the " + std::to_string(t->dest_size) + " bytes announced";
      return 0;
    }
    std::memcpy(t->dest + t->received, data, len);
    t->received += len;
    return len;
  }

  void check_deadlines_and_hedges(std::int64_t now) {
    const std::int64_t first_byte_ns = static_cast<std::int64_t>(options_.first_byte_timeout_ms) * 1'000'000;
    std::int64_t hedge_after = -1;
    if (options_.hedge_quantile > 0) {
      const auto snap = m_latency_->snapshot();
      if (snap.count >= 20) {
        hedge_after = std::max<std::int64_t>(static_cast<std::int64_t>(snap.percentile(options_.hedge_quantile)),
                                             static_cast<std::int64_t>(options_.hedge_min_ms) * 1'000'000);
      }
    }
    const std::int64_t stall_ns = static_cast<std::int64_t>(options_.stall_timeout_ms) * 1'000'000;
    std::vector<Transfer*> expired;
    std::vector<Job*> to_hedge;
    for (Transfer* t : transfers_) {
      if (t->first_byte_ns == 0 && now - t->start_ns > first_byte_ns) {
        t->local_failure = "no response within the first-byte deadline of " +
                           std::to_string(options_.first_byte_timeout_ms) + " ms";
        expired.push_back(t);
      } else if (t->first_byte_ns != 0 && now - t->last_byte_ns > stall_ns) {
        t->local_failure = "stalled: no data for " + std::to_string(options_.stall_timeout_ms) + " ms after " +
                           std::to_string(t->received) + " bytes";
        expired.push_back(t);
      }
      if (hedge_after > 0 && !t->job->hedged && !t->job->multipart &&
          t->part < 0 && now - t->start_ns > hedge_after && t->job->request.uri.scheme != Scheme::kFile) {
        to_hedge.push_back(t->job);
      }
    }
    for (Transfer* t : expired) finish_transfer(t, CURLE_OPERATION_TIMEDOUT);
    for (Job* job : to_hedge) {
      if (job->hedged || job->transfers.empty() || transfers_active() >= options_.max_inflight) continue;
      job->hedged = true;
      m_hedges_->add();
      start_transfer(job, -1, true);
    }
  }

  void process_completions() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
      finish_transfer(t, msg->data.result);
    }
  }

  // Classifies the outcome of one transfer; returns nullopt on success.
  std::optional<Error> outcome(Transfer* t, CURLcode code) {
    const std::string& uri = t->job->uri_text;
    if (!t->local_failure.empty()) {
      return Error(code == CURLE_OPERATION_TIMEDOUT ? ErrorCode::kTimeout : t->local_failure_code, t->local_failure, uri);
    }
    if (code != CURLE_OK) {
      const std::string detail = t->errbuf[0] ? t->errbuf : curl_easy_strerror(code);
      switch (code) {
        case CURLE_OPERATION_TIMEDOUT:
          return Error(ErrorCode::kTimeout, "timed out: " + detail, uri);
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
          return Error(ErrorCode::kInvalidArgument, detail, uri);
        case CURLE_TOO_MANY_REDIRECTS: {  // a loop: following it again ends the same way
          char* last = nullptr;
          curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &last);
          return Error(ErrorCode::kInvalidArgument,
                       "redirect loop: more than " + std::to_string(kMaxRedirects) + " redirects" +
                           (last != nullptr ? std::string(", the last to ") + last : std::string()),
                       uri);
        }
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
          return Error(ErrorCode::kPermissionDenied,
                       "TLS certificate not trusted: " + detail + " (give the CA bundle: --ca-bundle or AWS_CA_BUNDLE)",
                       uri);
        case CURLE_PARTIAL_FILE:
          return Error(ErrorCode::kIoError,
                       "truncated body: " + std::to_string(t->received) + " of " +
                           (t->content_length == kUnknown ? std::string("?") : std::to_string(t->content_length)) +
                           " bytes (" + detail + ")",
                       uri);
        default:
          return Error(ErrorCode::kIoError, detail, uri);
      }
    }
    if (t->status >= 200 && t->status < 300) {
      const std::uint64_t expected = t->grow ? t->received : t->dest_size;
      if (t->content_length != kUnknown && t->received != t->content_length) {
        return Error(ErrorCode::kIoError, "truncated body: " + std::to_string(t->received) + " of " +
                                              std::to_string(t->content_length) + " bytes", uri);
      }
      if (t->part >= 0 && t->received != expected) {
        return Error(ErrorCode::kIoError, "truncated part: " + std::to_string(t->received) + " of " +
                                              std::to_string(expected) + " bytes", uri);
      }
      return std::nullopt;
    }
    std::string message = "HTTP " + std::to_string(t->status);
    if (auto doc = parse_s3_error(t->error_body)) {
      message += " " + doc->code;
      if (!doc->message.empty()) message += ": " + doc->message;
    }
    switch (t->status) {
      case 404:
        return Error(ErrorCode::kNotFound, message, uri);
      case 401:
      case 403: {
        if (t->job->request.uri.scheme != Scheme::kS3) return Error(ErrorCode::kPermissionDenied, message, uri);
        return Error(ErrorCode::kPermissionDenied, message + permission_hint(s3_), uri);
      }
      case 408:
      case 429:
      case 503:
        return Error(ErrorCode::kUnavailable, message, uri);
      case 412:
        return Error(ErrorCode::kUnavailable, message + " (the object changed during the fetch)", uri);
      case 416:
        return Error(ErrorCode::kOutOfRange, message, uri);
      case 501:  // Not Implemented, HTTP Version Not Supported: asking again changes nothing
      case 505:
        return Error(ErrorCode::kInvalidArgument, message, uri);
      default:
        if (t->status >= 500) return Error(ErrorCode::kUnavailable, message, uri);
        return Error(ErrorCode::kInvalidArgument, message, uri);
    }
  }

  void finish_transfer(Transfer* t, CURLcode code) {
    ++finished_transfers_;
    Job* job = t->job;
    std::optional<Error> err = outcome(t, code);
    const std::int64_t now = core::now_ns();
    job->last_status = static_cast<int>(t->status);
    if (trace_ != nullptr) {
      trace_->complete(t->hedge ? "GET (hedge)" : (t->part >= 0 ? "GET part" : "GET"), "storage", t->start_ns,
                       now, job->uri_text);
    }
    if (t->first_byte_ns != 0) m_ttfb_->record(static_cast<std::uint64_t>(t->first_byte_ns - t->start_ns));
    const bool empty_object_probe = err && t->probe && t->status == 416;
    const bool object_changed = err && (t->status == 412 || t->object_changed);
    int part = t->part;
    detach(t);

    if (!err) {
      m_bytes_->add(static_cast<std::int64_t>(t->received));
      if (job->multipart) {
        ++job->parts_done;
        if (job->parts_done == job->parts) complete_job(job, std::move(job->buffer), t->hedge);
      } else {
        note_bytes(-static_cast<std::int64_t>(t->own.capacity()));
        t->own.resize(t->received);
        complete_job(job, std::move(t->own), t->hedge);
      }
      release(t);
      return;
    }
    release(t);
    if (empty_object_probe) {  // S3 answers 416 to a range on an empty object: ask again whole
      job->no_probe = true;
      start_transfer(job, -1, false);
      return;
    }
    if (!job->transfers.empty() && part < 0 && !job->multipart) return;  // its twin (hedge) may still win
    // max_attempts counts per request: each part of a large object has its own allowance. An
    // object replaced during the fetch restarts it from the probe; those restarts count against
    // the whole object's allowance, which they do not reset, so an object rewritten without end
    // still fails.
    int& failures = part >= 0 && !object_changed ? job->part_failures[part] : job->failures;
    const bool retryable = is_retryable(err->code()) && failures + 1 < options_.max_attempts;
    ++failures;
    if (!retryable) {
      std::string message = err->message();
      if (part >= 0 && !object_changed && job->parts > 1) {  // the part's own count, then all GETs
        message += " (part " + std::to_string(part) + " of " + std::to_string(job->parts) + ", after " +
                   std::to_string(failures) + " attempts of it; " + std::to_string(job->attempts) + " requests in all)";
      } else if (job->attempts > 1) {
        message += " (after " + std::to_string(job->attempts) + " attempts)";
      }
      fail_job(job, Error(err->code(), std::move(message), err->context()));
      return;
    }
    ++job->retries;
    m_retries_->add();
    if (object_changed) {  // object replaced: start over from the probe
      abort_transfers(job);
      drop_pending_parts(job);
      note_bytes(-static_cast<std::int64_t>(job->buffer.capacity()));
      job->buffer.reset();
      job->multipart = false;
      job->parts = job->parts_done = 0;
      job->part_failures.clear();
      part = -1;
    }
    const std::int64_t cap = std::min<std::int64_t>(options_.backoff_max_ms,
                                                    static_cast<std::int64_t>(options_.backoff_base_ms) << std::min(failures - 1, 20));
    std::uniform_int_distribution<std::int64_t> jitter(0, std::max<std::int64_t>(0, cap) * 1'000'000);
    retries_.push({now + jitter(rng_), job, part});
  }

  // Removes a transfer from the multi handle and the job (memory still owned by t).
  void detach(Transfer* t) {
    curl_multi_remove_handle(multi_, t->easy);
    transfers_.erase(std::find(transfers_.begin(), transfers_.end(), t));
    auto& jt = t->job->transfers;
    jt.erase(std::find(jt.begin(), jt.end(), t));
    m_inflight_->set(static_cast<std::int64_t>(transfers_.size()));
  }

  void release(Transfer* t) {
    if (!t->own.empty()) note_bytes(-static_cast<std::int64_t>(t->own.capacity()));
    curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    delete t;
  }

  void abort_transfers(Job* job) {
    while (!job->transfers.empty()) {
      Transfer* t = job->transfers.back();
      detach(t);
      release(t);
    }
  }

  void drop_pending_parts(Job* job) {
    std::erase_if(ready_parts_, [job](const PendingStart& p) { return p.job == job; });
    std::vector<PendingStart> keep;
    while (!retries_.empty()) {
      if (retries_.top().job != job) keep.push_back(retries_.top());
      retries_.pop();
    }
    for (const auto& p : keep) retries_.push(p);
  }

  void complete_job(Job* job, core::Buffer data, bool hedge_won) {
    abort_transfers(job);  // the losing twin of a hedge
    drop_pending_parts(job);
    if (job->multipart) note_bytes(-static_cast<std::int64_t>(data.capacity()));
    if (hedge_won) m_hedge_wins_->add();
    FetchResult r = base_result(job);
    r.hedge_won = hedge_won;
    r.data = std::move(data);
    --active_jobs_;
    deliver(job, std::move(r));
  }

  void fail_job(Job* job, Error error) {
    abort_transfers(job);
    drop_pending_parts(job);
    if (!job->buffer.empty()) note_bytes(-static_cast<std::int64_t>(job->buffer.capacity()));
    job->buffer.reset();
    FetchResult r = base_result(job);
    r.data = std::move(error);
    --active_jobs_;
    deliver(job, std::move(r));
  }

  FetchResult base_result(Job* job) {
    FetchResult r;
    r.tag = job->request.tag;
    r.uri = job->uri_text;
    r.attempts = job->attempts;
    r.retries = job->retries;
    r.http_status = job->last_status;
    r.latency_ns = core::now_ns() - job->start_ns;
    return r;
  }

  void deliver(Job* job, FetchResult result) {
    if (result.data.ok()) {
      m_ok_->add();
      m_latency_->record(static_cast<std::uint64_t>(result.latency_ns));
    } else {
      m_failed_->add();
      metrics_->counter(std::string("fetch.errors.") + std::string(error_code_name(result.data.error().code()))).add();
    }
    const bool pushed = completions_.try_push(std::move(result));
    if (!pushed && !cancelled_.load()) {
      // Admission keeps results under the queue's capacity; reaching this is a bug.
      throw std::logic_error("fetch completion queue overflow");
    }
    std::erase_if(jobs_, [job](const std::unique_ptr<Job>& j) { return j.get() == job; });
  }

  void cancel_everything() {
    // A local read still running is abandoned, not waited for: it may never return.
    for (const auto& [id, job] : local_jobs_) {
      files_->abandon(id);
      FetchResult r = base_result(job);
      r.data = Error(ErrorCode::kCancelled, "fetch cancelled", job->uri_text);
      deliver(job, std::move(r));
    }
    local_jobs_.clear();
    std::vector<Job*> live;
    for (auto& j : jobs_) live.push_back(j.get());
    for (Job* job : live) {
      abort_transfers(job);
      drop_pending_parts(job);
      if (!job->buffer.empty()) note_bytes(-static_cast<std::int64_t>(job->buffer.capacity()));
      FetchResult r = base_result(job);
      r.data = Error(ErrorCode::kCancelled, "fetch cancelled", job->uri_text);
      --active_jobs_;
      deliver(job, std::move(r));
    }
    for (FetchRequest& req : submitted_.cancel()) {
      FetchResult r;
      r.tag = req.tag;
      r.uri = req.uri.to_string();
      r.data = Error(ErrorCode::kCancelled, "fetch cancelled before it started", r.uri);
      m_failed_->add();
      (void)completions_.try_push(std::move(r));
    }
  }

  void note_bytes(std::int64_t delta) {
    inflight_bytes_ = static_cast<std::size_t>(static_cast<std::int64_t>(inflight_bytes_) + delta);
    m_inflight_bytes_->set(static_cast<std::int64_t>(inflight_bytes_));
  }

 public:
  core::BufferPool& engine_pool() { return pool_; }

 private:
  static constexpr std::size_t kShareLocks = 8;

  const FetchOptions options_;
  const S3Options s3_;
  std::string ca_file_;
  core::TraceWriter* trace_;
  core::MetricsRegistry own_metrics_;
  core::MetricsRegistry* metrics_;
  core::Counter *m_requests_, *m_ok_, *m_failed_, *m_retries_, *m_hedges_, *m_hedge_wins_, *m_bytes_;
  core::Histogram *m_latency_, *m_ttfb_;
  core::Gauge *m_inflight_, *m_inflight_bytes_;

  core::BoundedQueue<FetchRequest> submitted_;
  core::BoundedQueue<FetchResult> completions_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> waiting_for_consumer_{false};
  core::BufferPool pool_;

  CURLM* multi_ = nullptr;
  CURLSH* share_ = nullptr;
  std::array<std::mutex, kShareLocks> share_locks_;
  std::unique_ptr<FileReader> files_;
  std::thread thread_;

  // Owned by the I/O thread.
  std::list<std::unique_ptr<Job>> jobs_;
  std::vector<Transfer*> transfers_;
  std::deque<PendingStart> ready_parts_;
  std::uint64_t finished_transfers_ = 0;  // I/O thread only
  std::priority_queue<PendingStart, std::vector<PendingStart>, std::greater<>> retries_;
  int active_jobs_ = 0;
  std::map<std::uint64_t, Job*> local_jobs_;  // by FileRead id
  std::uint64_t next_local_id_ = 0;
  std::size_t inflight_bytes_ = 0;
  std::mt19937_64 rng_;
};

Fetcher::Fetcher(FetchOptions options, S3Options s3, core::MetricsRegistry* metrics, core::TraceWriter* trace)
    : options_(std::move(options)),
      s3_(std::move(s3)),
      engine_(std::make_unique<Engine>(options_, s3_, metrics, trace)) {}

Fetcher::~Fetcher() = default;

bool Fetcher::submit(FetchRequest request) { return engine_->submit(std::move(request)); }
std::optional<FetchResult> Fetcher::next() { return engine_->next(); }
std::optional<FetchResult> Fetcher::next_for(std::chrono::milliseconds timeout) { return engine_->next_for(timeout); }
void Fetcher::close() { engine_->close(); }
void Fetcher::cancel() { engine_->cancel(); }

}  // namespace mmfeed::storage
