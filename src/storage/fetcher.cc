// The fetch engine's loop on its I/O thread: requests admitted under the engine's limits, local
// reads handed to FileReader, libcurl's multi handle driven, results delivered in completion
// order, and everything ended by cancel(). One HTTP GET's life is in transfer.cc; the state both
// act on, and which thread owns it, in fetch_engine.h.
#include "storage/fetcher.h"

#include <algorithm>
#include <stdexcept>

#include "core/clock.h"
#include "core/thread_pool.h"
#include "storage/fetch_engine.h"

namespace mmfeed::storage {

Fetcher::Engine::Engine(const FetchOptions& options, const S3Options& s3, core::MetricsRegistry* metrics,
                        core::TraceWriter* trace)
    : options_(options),
      s3_(s3),
      policy_(options),
      ca_file_(resolve_ca_file(options)),
      trace_(trace),
      submitted_(std::max<std::size_t>(1, options.queue_capacity)),
      completions_(std::max<std::size_t>(1, options.max_pending_results + options.queue_capacity)),
      rng_(options.seed) {
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

  multi_ = curl_multi_init();
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(options_.max_inflight));
  files_ = std::make_unique<FileReader>(options_.local_threads, pool_, [multi = multi_] { curl_multi_wakeup(multi); });
  thread_ = std::thread([this] { run(); });
}

Fetcher::Engine::~Engine() {
  cancel();
  if (thread_.joinable()) thread_.join();
  files_.reset();  // before the multi handle goes: its readers wake the I/O thread through it
  curl_multi_cleanup(multi_);
}

bool Fetcher::Engine::submit(FetchRequest request) {
  if (!submitted_.push(std::move(request))) return false;
  curl_multi_wakeup(multi_);
  return true;
}

std::optional<FetchResult> Fetcher::Engine::next() {
  auto r = completions_.pop();
  wake_if_waiting_for_consumer();
  return r;
}

std::optional<FetchResult> Fetcher::Engine::next_for(std::chrono::milliseconds timeout) {
  auto r = completions_.pop_for(timeout);
  if (r) wake_if_waiting_for_consumer();
  return r;
}

void Fetcher::Engine::close() {
  submitted_.close();
  curl_multi_wakeup(multi_);
}

void Fetcher::Engine::cancel() {
  cancelled_.store(true);
  submitted_.close();
  curl_multi_wakeup(multi_);
}

void Fetcher::Engine::wake_if_waiting_for_consumer() {
  if (waiting_for_consumer_.exchange(false)) curl_multi_wakeup(multi_);
}

// ---- the I/O thread ------------------------------------------------------------------------

void Fetcher::Engine::run() {
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
    // start now instead of sleeping until the next event or the deadline tick.
    if (finished_transfers_ != finished) continue;
    const auto next_retry = retries_.empty() ? std::nullopt : std::optional<std::int64_t>(retries_.top().due_ns);
    curl_multi_poll(multi_, nullptr, 0, policy_.poll_wait_ms(next_retry, core::now_ns()), nullptr);
  }
  completions_.close();
}

bool Fetcher::Engine::room_for_job() {
  // Raise the flag before looking, so a result taken after the look always wakes us.
  waiting_for_consumer_.store(true);
  if (static_cast<std::size_t>(active_jobs_) + local_jobs_.size() + completions_.size() >=
      options_.max_pending_results) {
    return false;
  }
  waiting_for_consumer_.store(false);
  return transfers_active() < options_.max_inflight && inflight_bytes_ < options_.max_inflight_bytes &&
         ready_parts_.empty();
}

void Fetcher::Engine::admit_new_jobs(std::int64_t now) {
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

void Fetcher::Engine::start_due(std::int64_t now) {
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

// ---- local files ---------------------------------------------------------------------------

void Fetcher::Engine::start_local(Job* job) {
  const std::uint64_t id = next_local_id_++;
  local_jobs_.emplace(id, job);
  job->attempts = 1;
  FileRead read{.id = id,
                .path = job->request.uri.path,
                .uri = job->uri_text,
                .max_bytes = options_.max_object_bytes,
                .max_bytes_option = options_.max_object_bytes_option};
  if (job->request.range) {
    read.offset = job->request.range->offset;
    read.length = job->request.range->length;
  }
  files_->submit(std::move(read), options_.attempt_timeout_ms);
}

void Fetcher::Engine::collect_local_results() {
  for (auto& [id, data] : files_->take_done()) {
    const auto it = local_jobs_.find(id);
    Job* job = it->second;
    local_jobs_.erase(it);
    FetchResult r = base_result(job);
    r.data = std::move(data);
    deliver(job, std::move(r));
  }
}

// ---- delivery ------------------------------------------------------------------------------

void Fetcher::Engine::drop_pending_parts(Job* job) {
  std::erase_if(ready_parts_, [job](const PendingStart& p) { return p.job == job; });
  std::vector<PendingStart> keep;
  while (!retries_.empty()) {
    if (retries_.top().job != job) keep.push_back(retries_.top());
    retries_.pop();
  }
  for (const auto& p : keep) retries_.push(p);
}

void Fetcher::Engine::complete_job(Job* job, core::Buffer data, bool hedge_won) {
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

void Fetcher::Engine::fail_job(Job* job, Error error) {
  abort_transfers(job);
  drop_pending_parts(job);
  if (!job->buffer.empty()) note_bytes(-static_cast<std::int64_t>(job->buffer.capacity()));
  job->buffer.reset();
  FetchResult r = base_result(job);
  r.data = std::move(error);
  --active_jobs_;
  deliver(job, std::move(r));
}

FetchResult Fetcher::Engine::base_result(Job* job) {
  FetchResult r;
  r.tag = job->request.tag;
  r.uri = job->uri_text;
  r.attempts = job->attempts;
  r.retries = job->retries;
  r.http_status = job->last_status;
  r.latency_ns = core::now_ns() - job->start_ns;
  r.object_size = job->object_size;
  r.etag = job->etag;
  return r;
}

void Fetcher::Engine::deliver(Job* job, FetchResult result) {
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

void Fetcher::Engine::cancel_everything() {
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

void Fetcher::Engine::note_bytes(std::int64_t delta) {
  inflight_bytes_ = static_cast<std::size_t>(static_cast<std::int64_t>(inflight_bytes_) + delta);
  m_inflight_bytes_->set(static_cast<std::int64_t>(inflight_bytes_));
}

// ---- Fetcher ---------------------------------------------------------------------------------

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
