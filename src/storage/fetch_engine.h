// The fetch engine behind Fetcher (fetcher.h): its state, and who owns which part of it, declared
// once for the two files that define it -- fetcher.cc, the loop of the I/O thread (submissions,
// admission, local reads, delivery, cancel), and transfer.cc, the life of one HTTP GET (started,
// its answer checked and stored, finished: delivered, retried or failed). The decisions they take
// are pure functions elsewhere: response.h (is this the answer asked for), multipart.h (which
// bytes each GET asks for), classify.h (which error a failure is), retry_policy.h (try again, when,
// hedge), curl_easy.h (how a handle is set up).
//
// Threads: a caller of Fetcher, on any thread, touches only the two bounded queues, the atomics and
// curl_multi_wakeup. Everything else -- jobs, transfers, the pending starts, the byte count, the
// random generator -- belongs to the I/O thread ("fetch-io"), libcurl's header and body callbacks
// included (they run inside curl_multi_perform on that thread). Local files are read on
// FileReader's threads and come back through its queue.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/bounded_queue.h"
#include "core/buffer_pool.h"
#include "core/metrics.h"
#include "core/trace.h"
#include "storage/curl_easy.h"
#include "storage/fetcher.h"
#include "storage/file_reader.h"
#include "storage/response.h"
#include "storage/retry_policy.h"

namespace mmfeed::storage {

struct Job;

// One HTTP GET on the wire: the whole object, its first part (a probe that learns the size), a
// later part, or a hedge. Created and freed by the I/O thread; libcurl holds a pointer to it
// (CURLOPT_PRIVATE, the callbacks' user data) while it is added to the multi handle.
struct Transfer {
  Fetcher::Engine* engine = nullptr;
  Job* job = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  int part = -1;  // -1: whole object or probe; else the part index (a probe becomes part 0)
  bool probe = false;
  bool hedge = false;
  AskedRange asked;  // the Range header sent; end == kUnknown: none
  TransferTimes times;
  ResponseHeaders response;
  bool checked = false;       // the 2xx answer's headers were checked (prepare_destination)
  core::Buffer own;           // whole-object transfers write here
  std::byte* dest = nullptr;  // where body bytes go
  std::uint64_t dest_size = 0;
  std::uint64_t received = 0;
  bool grow = false;                   // no length known: own buffer grows
  std::string error_body;              // an S3 request's non-2xx answer's body, for its error document (capped)
  std::uint64_t error_body_bytes = 0;  // a non-2xx answer's body size, whatever the scheme
  std::optional<Refusal> refusal;      // set when our callbacks or deadlines stop the transfer
  bool past_deadline = false;          // marked by check_deadlines_and_hedges, which then finishes it
  char errbuf[CURL_ERROR_SIZE] = {};
};

// One submitted request, from admission to its one FetchResult. Owned by the I/O thread.
struct Job {
  FetchRequest request;
  std::string uri_text;  // request.uri.to_string(), credentials redacted: errors, results and the trace show this
  std::int64_t start_ns = 0;
  std::uint64_t object_size = 0;     // FetchResult::object_size
  int attempts = 0;                  // GETs sent
  int failures = 0;                  // failed attempts of the whole-object request, counted against max_attempts
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
  // Starts the I/O thread. `metrics` and `trace` may be null.
  Engine(const FetchOptions& options, const S3Options& s3, core::MetricsRegistry* metrics, core::TraceWriter* trace);
  ~Engine();  // cancel(), then join the I/O thread

  // Fetcher's calls, from any thread (fetcher.h says what each does).
  bool submit(FetchRequest request);
  std::optional<FetchResult> next();
  std::optional<FetchResult> next_for(std::chrono::milliseconds timeout);
  void close();
  void cancel();

 private:
  // ---- the loop (fetcher.cc) ----------------------------------------------------------------
  // A taken result frees a slot only when admission is blocked on untaken results; waking the
  // I/O thread on every pop would cost a syscall per object for nothing.
  void wake_if_waiting_for_consumer();
  // The I/O thread: starts, admits, checks deadlines, drives libcurl, until closed and drained.
  void run();
  std::size_t transfers_active() const { return transfers_.size(); }
  // Whether one more job may start: jobs in flight plus results not yet taken stay under
  // max_pending_results, transfers under max_inflight, held bytes under max_inflight_bytes, and
  // parts already waiting for a slot go first.
  bool room_for_job();
  // Takes submitted requests while there is room, and starts each (a local read or a GET).
  void admit_new_jobs(std::int64_t now);
  // Starts the parts waiting for a slot, then the retries due by `now`.
  void start_due(std::int64_t now);
  void start_local(Job* job);
  // Delivers the local reads that finished, and those whose deadline passed as kTimeout.
  void collect_local_results();
  // Removes a job's parts waiting for a slot and its retries.
  void drop_pending_parts(Job* job);
  void complete_job(Job* job, core::Buffer data, bool hedge_won);
  void fail_job(Job* job, Error error);
  FetchResult base_result(Job* job);
  // Counts `result`, queues it for next(), and frees its job.
  void deliver(Job* job, FetchResult result);
  // Delivers every job and every request still queued as kCancelled.
  void cancel_everything();
  void note_bytes(std::int64_t delta);

  // ---- one HTTP GET (transfer.cc) -----------------------------------------------------------
  void start_transfer(Job* job, int part, bool hedge);
  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user);
  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user);
  // Checks a 2xx answer (once, at the end of its headers) and decides where its body goes; false
  // refuses it (t->refusal says why).
  bool prepare_destination(Transfer* t);
  // Memory from the pool, or the transfer's final failure: running out of memory is this object's
  // error, never the process's end (and no exception may cross libcurl's C frames).
  bool acquire(Transfer* t, core::Buffer& out, std::uint64_t bytes);
  // Ends the transfers past a deadline (as timeouts), then hedges the requests still running that
  // are due a hedge.
  void check_deadlines_and_hedges(std::int64_t now);
  // Finishes the transfers libcurl reports done.
  void process_completions();
  // The error a finished transfer ended with; nullopt on success.
  std::optional<Error> outcome(Transfer* t, CURLcode code);
  // Ends a transfer: its job completes, fails, or is retried after a backoff.
  void finish_transfer(Transfer* t, CURLcode code);
  // Removes a transfer from the multi handle and the job (memory still owned by t).
  void detach(Transfer* t);
  void release(Transfer* t);
  void abort_transfers(Job* job);

  // Fixed at construction.
  const FetchOptions options_;
  const S3Options s3_;
  const RetryPolicy policy_;
  const std::string ca_file_;
  core::TraceWriter* trace_;
  core::MetricsRegistry own_metrics_;
  core::MetricsRegistry* metrics_;
  core::Counter *m_requests_, *m_ok_, *m_failed_, *m_retries_, *m_hedges_, *m_hedge_wins_, *m_bytes_;
  core::Histogram *m_latency_, *m_ttfb_;
  core::Gauge *m_inflight_, *m_inflight_bytes_;

  // Shared with the callers of Fetcher.
  core::BoundedQueue<FetchRequest> submitted_;
  core::BoundedQueue<FetchResult> completions_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> waiting_for_consumer_{false};
  core::BufferPool pool_;

  CurlShare share_;
  CURLM* multi_ = nullptr;
  std::unique_ptr<FileReader> files_;
  std::thread thread_;

  // Owned by the I/O thread.
  std::list<std::unique_ptr<Job>> jobs_;
  std::vector<Transfer*> transfers_;
  std::deque<PendingStart> ready_parts_;
  std::uint64_t finished_transfers_ = 0;
  std::priority_queue<PendingStart, std::vector<PendingStart>, std::greater<>> retries_;
  int active_jobs_ = 0;
  std::map<std::uint64_t, Job*> local_jobs_;  // by FileRead id
  std::uint64_t next_local_id_ = 0;
  std::size_t inflight_bytes_ = 0;
  std::mt19937_64 rng_;  // backoff jitter
};

}  // namespace mmfeed::storage
