// One HTTP GET of the fetch engine, on its I/O thread: started (the range it asks for, its curl
// handle), its headers folded and its 2xx answer checked before memory is committed for the body,
// its body stored, its deadlines watched, and its end classified -- the job completes, fails, or is
// tried again after a backoff. The state is declared in fetch_engine.h; the decisions are
// response.h's, multipart.h's, classify.h's and retry_policy.h's.
#include <algorithm>
#include <cstring>
#include <new>

#include "core/clock.h"
#include "storage/classify.h"
#include "storage/fetch_engine.h"
#include "storage/multipart.h"
#include "storage/s3.h"

namespace mmfeed::storage {

namespace {

constexpr std::size_t kMaxErrorBody = 16 << 10;  // of an S3 request's non-2xx answer, for its error document

}  // namespace

void Fetcher::Engine::start_transfer(Job* job, int part, bool hedge) {
  auto* t = new Transfer();
  t->engine = this;
  t->job = job;
  t->part = part;
  t->hedge = hedge;
  t->times.start_ns = core::now_ns();
  const ObjectUri& uri = job->request.uri;

  HeaderList extra;
  if (job->request.range) {
    t->asked = requested_range(*job->request.range);
  } else if (part >= 0) {
    t->asked = part_range(static_cast<std::size_t>(part), options_.part_size, job->total);
    t->dest = job->buffer.data() + t->asked.begin;
    t->dest_size = t->asked.end - t->asked.begin + 1;
    if (!job->etag.empty()) extra.emplace_back("if-match", job->etag);
  } else if (options_.part_size > 0 && !job->no_probe && !hedge) {
    t->probe = true;
    t->asked = probe_range(options_.part_size);
  }
  if (t->asked.end != kUnknown) extra.emplace_back("range", range_header(t->asked));
  if (!job->request.if_match.empty() && part < 0) extra.emplace_back("if-match", job->request.if_match);

  HttpRequest req;
  if (uri.scheme == Scheme::kS3) {
    req = s3_request(s3_, "GET", uri.bucket, uri.key, {}, extra);
  } else {
    req.url = uri.url;
    req.headers = extra;
  }
  t->easy = new_get_handle(
      options_, ca_file_, share_.get(), req, uri.scheme != Scheme::kS3,
      {.on_header = &Engine::on_header, .on_body = &Engine::on_body, .user = t, .errbuf = t->errbuf}, t->headers);

  ++job->attempts;
  job->transfers.push_back(t);
  transfers_.push_back(t);
  m_requests_->add();
  m_inflight_->set(static_cast<std::int64_t>(transfers_.size()));
  curl_multi_add_handle(multi_, t->easy);
}

std::size_t Fetcher::Engine::on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t len = size * n;
  t->times.last_byte_ns = core::now_ns();
  if (t->times.first_byte_ns == 0) t->times.first_byte_ns = t->times.last_byte_ns;
  const HeaderLine line = parse_header_line(std::string_view(data, len), t->response);
  // The end of a 2xx answer's headers: check it and take memory for its body now, before a body
  // byte arrives (an object over the size limit is refused before it costs anything).
  if (line == HeaderLine::kEnd && t->response.status >= 200 && t->response.status < 300 && !t->checked &&
      !t->engine->prepare_destination(t)) {
    return 0;
  }
  return len;
}

bool Fetcher::Engine::prepare_destination(Transfer* t) {
  t->checked = true;
  Job* job = t->job;
  std::optional<PartExpectation> part;
  if (t->part >= 0) part = PartExpectation{.total = job->total, .etag = job->etag};
  if (auto refusal = check_answer(t->response, t->asked, part)) {
    t->refusal = std::move(refusal);
    return false;
  }
  if (t->part >= 0) return true;  // its place in the object's buffer is set
  const BodyPlan plan = plan_body(t->response, t->probe, options_.part_size);
  if (plan.kind == BodyPlan::Kind::kGrow) {
    t->grow = true;
    return true;
  }
  if (auto refusal = check_object_size(plan.bytes, plan.declared_by, options_.max_object_bytes,
                                       options_.max_object_bytes_option)) {
    t->refusal = std::move(refusal);
    return false;
  }
  if (plan.kind == BodyPlan::Kind::kParts) {
    // A large object: allocate it whole; the probe fills part 0, parallel GETs the rest.
    if (!acquire(t, job->buffer, plan.bytes)) return false;
    job->multipart = true;
    job->total = plan.bytes;
    job->etag = t->response.etag;
    job->parts = plan.parts;
    note_bytes(static_cast<std::int64_t>(job->buffer.capacity()));
    t->part = 0;
    t->dest = job->buffer.data();
    t->dest_size = options_.part_size;
    for (std::size_t p = 1; p < job->parts; ++p) ready_parts_.push_back({0, job, static_cast<int>(p)});
    return true;
  }
  if (!acquire(t, t->own, plan.bytes)) return false;
  note_bytes(static_cast<std::int64_t>(t->own.capacity()));
  t->dest = t->own.data();
  t->dest_size = plan.bytes;
  return true;
}

bool Fetcher::Engine::acquire(Transfer* t, core::Buffer& out, std::uint64_t bytes) {
  try {
    out = pool_.acquire(static_cast<std::size_t>(bytes));
    return true;
  } catch (const std::bad_alloc&) {
    t->refusal = Refusal{.code = ErrorCode::kResourceExhausted,
                         .message = "out of memory for a body of " + std::to_string(bytes) + " bytes"};
    return false;
  }
}

std::size_t Fetcher::Engine::on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t len = size * n;
  t->times.last_byte_ns = core::now_ns();
  if (t->response.status < 200 || t->response.status >= 300) {
    t->error_body_bytes += len;
    if (t->job->request.uri.scheme == Scheme::kS3) {  // only S3's error document is ever read
      const std::size_t keep = std::min(len, kMaxErrorBody - std::min(kMaxErrorBody, t->error_body.size()));
      t->error_body.append(data, keep);
    }
    return len;
  }
  Engine* engine = t->engine;
  if (t->grow) {
    // A body of unknown length (chunked, or ended by closing the connection) is refused as
    // soon as it passes the limit, and its buffer never grows beyond the limit.
    if (auto refusal = check_object_size(t->received + len, "received so far, no length declared",
                                         engine->options_.max_object_bytes, engine->options_.max_object_bytes_option)) {
      t->refusal = std::move(refusal);
      return 0;
    }
    if (t->received + len > t->own.capacity()) {
      const std::uint64_t want = std::min<std::uint64_t>(
          std::max<std::uint64_t>(t->own.capacity() * 2, t->received + len), engine->options_.max_object_bytes);
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
    t->refusal = Refusal{.message = "server sent more than the " + std::to_string(t->dest_size) + " bytes announced"};
    return 0;
  }
  std::memcpy(t->dest + t->received, data, len);
  t->received += len;
  return len;
}

void Fetcher::Engine::check_deadlines_and_hedges(std::int64_t now) {
  // Finishing a transfer may end its job, and a job that ends frees itself and its other transfers
  // (a part's final failure fails the whole object). So no Transfer* or Job* is held across a
  // finish_transfer: the transfers past a deadline are marked, then finished one at a time, each
  // found again among the living (a few, and transfers_ is at most max_inflight long); the hedges
  // are chosen afterwards from what is still running.
  for (Transfer* t : transfers_) {
    if (auto missed = policy_.missed_deadline(t->times, t->received, now)) {
      t->refusal = Refusal{.message = std::move(*missed)};
      t->past_deadline = true;
    }
  }
  const auto past_deadline = [](const Transfer* t) { return t->past_deadline; };
  for (auto it = std::ranges::find_if(transfers_, past_deadline); it != transfers_.end();
       it = std::ranges::find_if(transfers_, past_deadline)) {
    finish_transfer(*it, CURLE_OPERATION_TIMEDOUT);
  }
  const std::int64_t hedge_after = policy_.hedge_after_ns(*m_latency_);
  // Hedging frees nothing; the hedges it appends to transfers_ are past `running`, never hedged.
  const std::size_t running = transfers_.size();
  for (std::size_t i = 0; i < running && transfers_active() < options_.max_inflight; ++i) {
    Transfer* t = transfers_[i];
    Job* job = t->job;
    if (job->hedged || job->multipart || t->part >= 0 || job->request.uri.scheme == Scheme::kFile ||
        !RetryPolicy::hedge_due(hedge_after, t->times.start_ns, now)) {
      continue;
    }
    job->hedged = true;
    m_hedges_->add();
    start_transfer(job, -1, true);
  }
}

void Fetcher::Engine::process_completions() {
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Transfer* t = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
    finish_transfer(t, msg->data.result);
  }
}

std::optional<Error> Fetcher::Engine::outcome(Transfer* t, CURLcode code) {
  const std::string& uri = t->job->uri_text;
  if (t->refusal) return classify_refusal(*t->refusal, code, uri);
  if (code != CURLE_OK) {
    char* last_url = nullptr;
    long redirects = 0;
    curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &last_url);
    curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_COUNT, &redirects);
    return classify_curl_failure({.code = code,
                                  .detail = t->errbuf[0] ? std::string_view(t->errbuf) : curl_easy_strerror(code),
                                  .last_url = last_url,
                                  .redirects = redirects,
                                  .in_headers = !t->response.ended,
                                  .received = t->received,
                                  .content_length = t->response.content_length},
                                 uri);
  }
  if (t->response.status >= 200 && t->response.status < 300) {
    return check_body_complete(t->response, t->received, t->part >= 0, t->grow ? t->received : t->dest_size, uri);
  }
  return classify_http_status(t->response.status, {.body = t->error_body, .bytes = t->error_body_bytes},
                              t->job->request.uri.scheme == Scheme::kS3 ? &s3_ : nullptr, uri);
}

void Fetcher::Engine::finish_transfer(Transfer* t, CURLcode code) {
  ++finished_transfers_;
  Job* job = t->job;
  std::optional<Error> err = outcome(t, code);
  const std::int64_t now = core::now_ns();
  job->last_status = static_cast<int>(t->response.status);
  if (trace_ != nullptr) {
    trace_->complete(t->hedge ? "GET (hedge)" : (t->part >= 0 ? "GET part" : "GET"), "storage", t->times.start_ns, now,
                     job->uri_text);
  }
  if (t->times.first_byte_ns != 0)
    m_ttfb_->record(static_cast<std::uint64_t>(t->times.first_byte_ns - t->times.start_ns));
  const bool empty_object_probe = err && t->probe && t->response.status == 416;
  const long answered = t->response.status;
  const bool object_changed = err && (answered == 412 || (t->refusal && t->refusal->object_changed));
  int part = t->part;
  detach(t);

  if (!err) {
    m_bytes_->add(static_cast<std::int64_t>(t->received));
    if (!job->multipart) job->etag = t->response.etag;
    if (t->response.range_total != kUnknown) {
      job->object_size = t->response.range_total;
    } else if (t->response.status == 200) {
      job->object_size = t->received;
    }
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
  ++failures;
  // Asked for one version (If-Match) and told it is gone: asking again cannot help.
  const bool version_gone = answered == 412 && !job->request.if_match.empty();
  if (version_gone || !policy_.should_retry(err->code(), failures)) {
    fail_job(job, final_error(*err, {.part = object_changed ? -1 : part,
                                     .parts = job->parts,
                                     .part_failures = failures,
                                     .attempts = job->attempts}));
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
  retries_.push({now + policy_.backoff_ns(failures, rng_), job, part});
}

void Fetcher::Engine::detach(Transfer* t) {
  curl_multi_remove_handle(multi_, t->easy);
  transfers_.erase(std::find(transfers_.begin(), transfers_.end(), t));
  auto& jt = t->job->transfers;
  jt.erase(std::find(jt.begin(), jt.end(), t));
  m_inflight_->set(static_cast<std::int64_t>(transfers_.size()));
}

void Fetcher::Engine::release(Transfer* t) {
  if (!t->own.empty()) note_bytes(-static_cast<std::int64_t>(t->own.capacity()));
  curl_easy_cleanup(t->easy);
  curl_slist_free_all(t->headers);
  delete t;
}

void Fetcher::Engine::abort_transfers(Job* job) {
  while (!job->transfers.empty()) {
    Transfer* t = job->transfers.back();
    detach(t);
    release(t);
  }
}

}  // namespace mmfeed::storage
