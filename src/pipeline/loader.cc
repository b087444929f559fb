// The Loader's wiring and the stages not yet in files of their own: the sample processor
// (prepare, process, decode_images), the byte budget (admission, hold/release) and the serial and
// concurrent drivers (reader, collector, batcher, next). Over 600 lines for that reason: they
// share the LoaderImpl's state (queues, budget counters, the fetcher), and moving each behind an
// interface of its own is the rest of issue 17; the configuration, resume state, error budget,
// packer and assembler are already apart (docs/ARCHITECTURE.md).
#include "mmfeed/loader.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include "core/bounded_queue.h"
#include "core/buffer_pool.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/metrics.h"
#include "core/scratch.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "dataset/manifest.h"
#include "device/cuda_runtime.h"
#include "pipeline/assembler.h"
#include "pipeline/config.h"
#include "pipeline/error_budget.h"
#include "pipeline/order.h"
#include "pipeline/packer.h"
#include "pipeline/resume_state.h"
#include "storage/credentials.h"
#include "storage/fetcher.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "vision/processor.h"

namespace mmfeed {

std::size_t Tensor::bytes() const {
  std::size_t n = dtype == DType::kInt64 ? 8 : 4;
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

const Tensor* Batch::find(std::string_view name) const {
  for (const Tensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const void* Batch::data(const Tensor& t) const { return storage->data() + t.offset; }

Loader::~Loader() = default;

namespace {

using dataset::ManifestLine;
using pipeline::Work;
using dataset::Manifests;

// The loader's state once a batch is delivered: position, packed rows, the samples they held.
struct BatchEnd {
  std::uint64_t position = 0;
  std::uint64_t packed_delivered = 0;
  std::vector<std::uint64_t> window_delivered;
};

// The tokenizer, loaded (about 0.1 s for a 150k vocabulary) while the first images are fetched.
struct LoadedTokenizer {
  std::unique_ptr<text::Tokenizer> tok;
  std::int32_t pad_id = 0;
};
using TokenizerFuture = std::shared_future<Result<std::shared_ptr<const LoadedTokenizer>>>;

TokenizerFuture load_tokenizer(const std::string& path) {
  return std::async(std::launch::async, [path]() -> Result<std::shared_ptr<const LoadedTokenizer>> {
           MMFEED_ASSIGN_OR_RETURN(auto tok, text::Tokenizer::from_file(path));
           auto loaded = std::make_shared<LoadedTokenizer>();
           loaded->pad_id = tok->token_to_id("<|endoftext|>").value_or(0);
           loaded->tok = std::move(tok);
           return std::shared_ptr<const LoadedTokenizer>(std::move(loaded));
         }).share();
}

class LoaderImpl final : public Loader {
 public:
  // The one key of the loader's maps: a sample (epoch, position in the rank's order) or a batch
  // (epoch, batch number), ordered by epoch first. 2^40 positions an epoch, 2^24 epochs.
  static std::uint64_t key(int epoch, std::uint64_t n) { return (static_cast<std::uint64_t>(epoch) << 40) | n; }

  LoaderImpl(pipeline::Settings settings, Manifests manifests, TokenizerFuture tok, storage::S3Options s3,
             LoaderState start)
      : config_(settings.options),
        serial_(settings.serial),
        fail_on_error_(settings.fail_on_error),
        remainder_(settings.remainder),
        manifests_(std::move(manifests)),
        tok_(std::move(tok)),
        proc_(std::move(settings.vision)),
        tmpl_(settings.chat_template),
        sft_(settings.sft),
        s3_(std::move(s3)),
        trace_(core::TraceOptions{.enabled = !config_.trace_path.empty(), .max_events = 1 << 22}),
        delivered_(start),
        start_(start),
        out_(std::max<std::size_t>(1, config_.prefetch_batches)) {
    m_wait_ = &metrics_.histogram("loader.consumer_wait_ns");
    m_batches_ = &metrics_.counter("loader.batches");
    m_duplicate_ids_ = &metrics_.counter("loader.duplicate_sample_ids");
    m_process_ = &metrics_.histogram("loader.process_sample_ns");
    m_decode_ = &metrics_.histogram("loader.decode_images_ns");
    m_assemble_ = &metrics_.histogram("loader.assemble_batch_ns");
    m_buffered_ = &metrics_.gauge("loader.buffered_bytes");
    m_prefetched_ = &metrics_.gauge("loader.prefetched_batches");
    storage::FetchOptions fo;
    fo.max_inflight = serial_ ? 1 : config_.fetch_inflight;
    fo.max_pending_results = std::max<std::size_t>(fo.max_inflight * 2, 16);
    // What is being fetched counts against the byte budget too, not only what has arrived: no
    // object may outgrow the budget, and the bytes in-flight requests hold stay under it.
    fo.max_object_bytes = std::min(config_.max_object_bytes, config_.max_buffered_bytes);
    fo.max_inflight_bytes = config_.max_buffered_bytes;
    fetcher_ = std::make_unique<storage::Fetcher>(fo, s3_, &metrics_, trace_.enabled() ? &trace_ : nullptr);
  }

  // Starts the concurrent mode's threads; a thread the system refuses is an error (what started
  // is stopped), not an abort.
  Status start() {
    if (serial_) return ok_status();
    try {
      start_threads();
    } catch (const std::system_error& e) {
      close();
      return Error(ErrorCode::kResourceExhausted, "cannot start " + std::to_string(config_.workers) +
                                                      " worker threads: " + e.what() + "; give fewer workers",
                   "LoaderConfig.workers");
    }
    return ok_status();
  }

  ~LoaderImpl() override { close(); }

  Result<std::optional<Batch>> next() override {
    bool timed_out = false;
    return next_impl(std::nullopt, &timed_out);
  }

  Result<std::optional<Batch>> next_for(std::chrono::milliseconds timeout, bool* timed_out) override {
    return next_impl(timeout, timed_out);
  }

  Result<std::optional<Batch>> next_impl(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) {
    *timed_out = false;
    const core::Stopwatch wait;
    Result<std::optional<Batch>> r = Error(ErrorCode::kInternal, "unset");
    {
      core::TraceSpan span(&trace_, serial_ ? "next (serial work)" : "next (waiting)", "consumer");
      r = serial_ ? next_serial() : next_concurrent(timeout, timed_out);
    }
    if (*timed_out) {  // a partial wait: counted with the call that gets the batch
      waited_ns_ += wait.elapsed_ns();
      return r;
    }
    if (r.ok() && !r->has_value() && closed_.load() && !ended_.load()) {
      // close() before the data ended (from another thread while this call waited, perhaps): say
      // so, or the consumer would take it for the end of the data.
      return Error(ErrorCode::kCancelled, "the loader was closed (close() was called) before the end of its data");
    }
    m_wait_->record(static_cast<std::uint64_t>(wait.elapsed_ns() + waited_ns_));
    waited_ns_ = 0;
    if (r.ok() && r->has_value()) {
      m_batches_->add();
      std::lock_guard lock(state_mu_);
      const auto it = batch_end_.find(key((*r)->epoch, (*r)->index));
      if ((*r)->epoch != delivered_.epoch) {  // a resharded epoch is over: plain order again
        delivered_.old_world_size = 0;
        delivered_.old_positions.clear();
        delivered_.old_windows.clear();
      }
      delivered_.epoch = (*r)->epoch;
      delivered_.position = it->second.position;
      delivered_.packed_delivered = it->second.packed_delivered;
      delivered_.window_delivered = std::move(it->second.window_delivered);
      batch_end_.erase(it);
    }
    return r;
  }

  LoaderState state() const override {
    std::lock_guard lock(state_mu_);
    return delivered_;
  }

  std::vector<SampleError> errors() const override {
    return budget_.errors();
  }

  std::string metrics_json() const override {
    std::string json = metrics_.to_json();
    json.pop_back();  // add where batch memory comes from
    json += ",\"batch_memory\":";
    core::append_json_string(json, describe_batch_memory());
    const core::BufferPoolStats p = pool_buffers_.stats();
    json += ",\"batch_buffers\":{\"acquires\":" + std::to_string(p.acquires) + ",\"reuses\":" +
            std::to_string(p.reuses) + ",\"allocations\":" + std::to_string(p.allocations) +
            ",\"peak_bytes_in_use\":" + std::to_string(p.peak_bytes_in_use) +
            ",\"bytes_cached\":" + std::to_string(p.bytes_cached) + "}";
    // Each stage's busy time, items and share of its threads' time since open (the CPU stages
    // run on `workers` threads; assembly on the batcher; the consumer's share is its waiting).
    const double wall = std::max(opened_.elapsed_s(), 1e-9);
    const double workers = serial_ ? 1.0 : static_cast<double>(std::max(1, config_.workers));
    json += ",\"stages\":{\"wall_s\":" + std::to_string(wall);
    auto stage = [&](const char* name, const core::Histogram* h, double threads) {
      const core::HistogramSnapshot snap = h->snapshot();
      const double busy = static_cast<double>(snap.sum) / 1e9;
      json += ",\"" + std::string(name) + "\":{\"items\":" + std::to_string(snap.count) + ",\"busy_s\":" +
              std::to_string(busy) + ",\"busy_share\":" + std::to_string(busy / (wall * threads)) + "}";
    };
    stage("process", m_process_, workers);
    stage("decode", m_decode_, workers);
    stage("assemble", m_assemble_, 1.0);
    stage("consumer_wait", m_wait_, 1.0);
    json += "}";
    return json + "}";
  }

  void close() override {
    if (closed_.exchange(true)) return;
    stop_.store(true);
    fetcher_->cancel();
    ready_cv_.notify_all();
    window_cv_.notify_all();
    (void)out_.cancel();
    for (std::thread* t : {&reader_, &collector_, &batcher_}) {
      if (t->joinable()) t->join();
    }
    if (pool_) pool_->shutdown();
    if (trace_.enabled()) (void)trace_.write_file(config_.trace_path);
  }

 private:
  // ---- shared sample work -----------------------------------------------------------------
  std::vector<std::uint64_t> order(int epoch) const {
    if (epoch == start_.epoch && start_.old_world_size > 0) {
      return pipeline::resharded_order(manifests_.lines.size(), config_.seed, epoch, config_.shuffle, start_.old_world_size,
                                       start_.old_positions, start_.old_windows, config_.rank, config_.world_size,
                                       remainder_);
    }
    return pipeline::rank_order(manifests_.lines.size(), config_.seed, epoch, config_.rank, config_.world_size,
                                config_.shuffle, remainder_);
  }

  // Parses the sample's line and resolves its image URIs.
  std::unique_ptr<Work> prepare(int epoch, std::uint64_t seq, std::uint64_t line_index) const {
    auto w = std::make_unique<Work>();
    w->epoch = epoch;
    w->seq = seq;
    const ManifestLine& line = manifests_.lines[line_index];
    const std::string& base_dir = manifests_.files[line.manifest].base_dir;
    w->id = manifests_.where(line);
    auto c = text::parse_conversation(manifests_.text(line));
    if (!c.ok()) {
      std::string reason = c.error().to_string();
      if (auto id = text::sample_id_of(manifests_.text(line))) {  // keyed by its id, the line named in the reason
        reason += " (" + w->id + ")";
        w->id = std::move(*id);
      }
      w->error = SampleError{w->id, "manifest", std::move(reason), c.error().code()};
      return w;
    }
    if (!c->id.empty()) w->id = c->id;
    if (c->count(text::ContentItem::Type::kVideo) > 0) {
      w->error = SampleError{w->id, "manifest", "videos are not supported yet", ErrorCode::kUnsupported};
      return w;
    }
    if (const std::size_t n = c->count(text::ContentItem::Type::kImage); n > config_.max_images_per_sample) {
      w->error = SampleError{w->id, "manifest", "sample names " + std::to_string(n) +
                                                    " images, more than max_images_per_sample (" +
                                                    std::to_string(config_.max_images_per_sample) + ")",
                             ErrorCode::kResourceExhausted};
      return w;
    }
    for (const std::string& uri : c->media(text::ContentItem::Type::kImage)) {
      auto parsed = dataset::resolve(uri, base_dir);
      if (!parsed.ok()) {
        w->error = SampleError{w->id, "manifest", parsed.error().to_string(), parsed.error().code()};
        return w;
      }
      w->images.push_back(std::move(parsed).value());
    }
    w->conversation = std::move(c).value();
    w->bytes.resize(w->images.size());
    return w;
  }

  // The grids from the images' headers, then the text (rendered and tokenized with them), then,
  // unless `defer_images` (packing: the batcher plans rows from the token counts first and has
  // the images decoded row by row), the images decoded and resized.
  void process(Work& w, bool defer_images) const {
    core::TraceSpan span(&trace_, "process sample", "cpu", w.id);
    const core::Stopwatch sw;
    for (std::size_t i = 0; i < w.bytes.size(); ++i) {
      auto info = vision::probe(bytes_of(w, i));
      Result<vision::Grid> grid = info.ok() ? proc_.plan(*info) : Result<vision::Grid>(info.error());
      if (!grid.ok()) {
        w.error = SampleError{w.id, "image", grid.error().with_context(w.images[i].to_string()).to_string(),
                              grid.error().code()};
        return;
      }
      w.infos.push_back(*info);
      w.grids.push_back(*grid);
    }
    // The pixel rows the batch will hold for this sample, known from the headers before any
    // pixel is decoded: a sample that alone exceeds the byte budget can never be buffered.
    std::uint64_t pixel_bytes = 0;
    for (const vision::Grid& g : w.grids) {
      pixel_bytes += static_cast<std::uint64_t>(g.rows()) * proc_.row_bytes();
    }
    if (pixel_bytes > config_.max_buffered_bytes) {
      const std::size_t n = w.grids.size();
      w.error = SampleError{w.id, "image", "its " + std::to_string(n) + (n == 1 ? " image needs " : " images need ") +
                                               std::to_string(pixel_bytes) + " bytes of pixel rows, more than "
                                               "max_buffered_bytes (" + std::to_string(config_.max_buffered_bytes) +
                                               "); lower max_pixels or raise the budget",
                            ErrorCode::kResourceExhausted};
      return;
    }
    std::vector<text::Grid3> grids;
    for (const vision::Grid& g : w.grids) grids.push_back({g.t, g.h, g.w});
    const auto& tok = tok_.get();  // waits for it once, at the start
    if (!tok.ok()) {
      w.error = SampleError{w.id, "text", tok.error().to_string(), tok.error().code()};
      return;
    }
    auto s = text::encode_conversation(*(*tok)->tok, w.conversation, tmpl_, grids, {}, sft_);
    if (!s.ok()) {
      w.error = SampleError{w.id, "text", s.error().to_string(), s.error().code()};
      return;
    }
    if (s->images_kept < w.grids.size()) {  // truncation dropped trailing images
      w.grids.resize(s->images_kept);
      for (std::size_t i = s->images_kept; i < w.bytes.size(); ++i) {
        hold(w, -static_cast<std::int64_t>(w.bytes[i].capacity()));
        w.bytes[i].reset();
      }
    }
    if (config_.token_budget > 0 && s->input_ids.size() > config_.token_budget) {
      w.error = SampleError{w.id, "text", "sample has " + std::to_string(s->input_ids.size()) +
                                              " tokens, more than token_budget " + std::to_string(config_.token_budget),
                            ErrorCode::kOutOfRange};
      return;
    }
    w.input_ids = std::move(s->input_ids);
    w.labels = std::move(s->labels);
    w.mrope = std::move(s->position_ids);
    if (!defer_images && !decode_images(w, /*account=*/true)) return;
    std::size_t image_bytes = 0;
    for (const vision::Resized& r : w.resized) image_bytes += r.image.pixels.size();
    hold(w, static_cast<std::int64_t>(image_bytes + (w.input_ids.size() * 2 + w.mrope.size()) * sizeof(std::int32_t)));
    m_process_->record(static_cast<std::uint64_t>(sw.elapsed_ns()));
  }

  // A fetch error as reported; an object refused for its size under a byte budget smaller than
  // max_object_bytes says which limit bound it.
  std::string fetch_failure(const Error& e) const {
    std::string reason = e.to_string();
    if (e.code() == ErrorCode::kResourceExhausted && config_.max_buffered_bytes < config_.max_object_bytes) {
      reason += "; here max_buffered_bytes (" + std::to_string(config_.max_buffered_bytes) +
                ") is the limit, being smaller than max_object_bytes";
    }
    return reason;
  }

  static std::span<const std::uint8_t> bytes_of(const Work& w, std::size_t i) {
    return {reinterpret_cast<const std::uint8_t*>(w.bytes[i].data()), w.bytes[i].size()};
  }

  // Decodes and resizes the sample's (kept) images; normalized and patchified later by
  // assemble() straight into the batch. `account`: the fetched bytes count against the byte
  // budget until now (not when the batcher, which has released the sample, calls it).
  bool decode_images(Work& w, bool account) const {
    core::TraceSpan span(&trace_, "decode images", "cpu", w.id);
    const core::Stopwatch sw;
    bool ok = true;
    for (std::size_t i = 0; i < w.grids.size(); ++i) {
      auto resized = proc_.resize(bytes_of(w, i), w.infos[i]);
      if (!resized.ok()) {
        w.error = SampleError{w.id, "image", resized.error().with_context(w.images[i].to_string()).to_string(),
                              resized.error().code()};
        ok = false;
        break;
      }
      w.resized.push_back(std::move(resized).value());
      if (account) hold(w, -static_cast<std::int64_t>(w.bytes[i].capacity()));
      w.bytes[i].reset();
    }
    m_decode_->record(static_cast<std::uint64_t>(sw.elapsed_ns()));
    return ok;
  }

  // Admission against max_buffered_bytes: what is held now, plus what the samples admitted but
  // not yet processed will hold, estimated from the samples processed so far (until there is an
  // estimate, one batch or two samples per worker, whichever is more, are admitted).
  bool room_for_sample() const {
    const std::int64_t measured = samples_measured_.load();
    const std::int64_t pending = unprocessed_.load();
    if (measured == 0) {
      return pending < std::max<std::int64_t>(2 * std::max(1, config_.workers), static_cast<std::int64_t>(config_.batch_size));
    }
    const std::int64_t projected = buffered_.load() + (pending + 1) * (sample_bytes_total_.load() / measured);
    return projected < static_cast<std::int64_t>(config_.max_buffered_bytes);
  }

  // Byte accounting against max_buffered_bytes (concurrent mode; the serial mode holds one
  // sample at a time by construction).
  void hold(Work& w, std::int64_t delta) const {
    if (serial_) return;
    w.held += delta;
    buffered_.fetch_add(delta);
  }
  void release(Work& w) {
    if (serial_) return;
    buffered_.fetch_sub(w.held);
    w.held = 0;
    { std::lock_guard lock(window_mu_); }  // the reader is either before its check or asleep
    window_cv_.notify_all();
  }

  // Accounts a finished sample: errors go to the report (or fail the run), the rest batch.
  Status account(Work& w) {
    note_id(w);
    return budget_.count(w.error);
  }

  // Duplicate sample ids make errors() and sample_ids ambiguous: counted over this rank's first
  // epoch (8 bytes a sample until it ends) as loader.duplicate_sample_ids. Accounting thread only.
  void note_id(const Work& w) {
    if (w.epoch == start_.epoch) {
      id_hashes_.push_back(std::hash<std::string>{}(w.id));
    } else {
      count_duplicate_ids();
    }
  }
  void count_duplicate_ids() {
    if (id_hashes_.empty()) return;
    std::sort(id_hashes_.begin(), id_hashes_.end());
    std::int64_t duplicates = 0;
    for (std::size_t i = 1; i < id_hashes_.size(); ++i) duplicates += id_hashes_[i] == id_hashes_[i - 1] ? 1 : 0;
    m_duplicate_ids_->add(duplicates);
    id_hashes_ = {};
  }

  // The group's batch (pipeline/assembler.h), and the state after it for when it is delivered.
  Batch assemble(std::vector<std::unique_ptr<Work>>& samples, int epoch, std::uint64_t index,
                 BatchEnd state_after) {
    core::TraceSpan span(&trace_, "assemble batch", "batch");
    const core::Stopwatch sw;
    const pipeline::BatchLayout layout{.packed = config_.token_budget > 0,
                                       .pad_to_multiple_of = config_.pad_to_multiple_of,
                                       .mrope = config_.mrope,
                                       .pad_id = (*tok_.get())->pad_id};  // loaded: every sample was tokenized
    Batch b = pipeline::assemble_batch(samples, layout, proc_, pool_buffers_, high_water_);
    b.epoch = epoch;
    b.index = index;
    std::lock_guard lock(state_mu_);
    batch_end_[key(epoch, index)] = std::move(state_after);
    m_assemble_->record(static_cast<std::uint64_t>(sw.elapsed_ns()));
    return b;
  }

  // The window packed into rows (pipeline/packer.h) by the samples' token counts.
  std::vector<std::vector<std::unique_ptr<Work>>> pack(std::vector<std::unique_ptr<Work>> window) const {
    std::vector<std::size_t> lengths;
    for (const auto& w : window) lengths.push_back(w->input_ids.size());
    std::vector<std::vector<std::unique_ptr<Work>>> rows;
    for (const std::vector<std::size_t>& row : pipeline::pack_rows(lengths, config_.token_budget)) {
      rows.emplace_back();
      for (std::size_t i : row) rows.back().push_back(std::move(window[i]));
    }
    return rows;
  }

  // Samples gathered before batches are formed: a padded batch, or a packing window.
  std::size_t group_size() const { return config_.token_budget > 0 ? config_.pack_window : config_.batch_size; }

  struct Built {
    Batch batch;
  };

  // A gathered group [start, end) of the epoch's order into batches: one padded batch, or the
  // packed rows of the window. The state after each says where a resumed run picks up: after
  // the window for its last row, else the window's start with the rows already delivered.
  // Forms the group's batches and hands each to `sink` as soon as it is assembled (false from
  // the sink: stop). Packing, the rows are planned from token counts known from the image
  // headers, and the samples' images are decoded only now, row by row in the order the rows are
  // delivered (on the pool in the concurrent mode), so the first row does not wait for the whole
  // window. An image that fails to decode drops its sample from its row and is reported; a
  // failure (on_error=fail, the error budget) is returned.
  Result<bool> build_batches(std::vector<std::unique_ptr<Work>> samples, int epoch, std::uint64_t start,
                             std::uint64_t end, std::uint64_t skip_rows, std::uint64_t& index,
                             const std::function<bool(Built)>& sink) {
    if (config_.token_budget == 0) return sink({assemble(samples, epoch, index++, BatchEnd{end, 0, {}})});
    struct Decoding {
      std::vector<std::vector<std::unique_ptr<Work>>> rows;
      std::vector<std::size_t> left;  // per row: samples still being decoded
      std::mutex mu;
      std::condition_variable cv;
    };
    auto d = std::make_shared<Decoding>();
    d->rows = pack(std::move(samples));
    d->left.assign(d->rows.size(), 0);
    // Without a pool (the serial mode) each row's images are decoded just before it is assembled.
    const bool on_pool = pool_ != nullptr;
    if (on_pool) {
      for (std::size_t k = skip_rows; k < d->rows.size(); ++k) d->left[k] = d->rows[k].size();
      for (std::size_t k = skip_rows; k < d->rows.size(); ++k) {
        for (const auto& w : d->rows[k]) {
          // The task keeps the rows alive: the batcher may stop before it runs.
          if (!pool_->submit([this, d, k, sample = w.get()] {
                decode_images(*sample, /*account=*/false);
                {
                  std::lock_guard lock(d->mu);
                  --d->left[k];
                }
                d->cv.notify_all();
              })) {
            return false;
          }
        }
      }
    }
    std::vector<std::uint64_t> delivered;  // positions in the rows up to k, rows skipped on resume included
    for (std::size_t k = 0; k < d->rows.size(); ++k) {
      for (const auto& w : d->rows[k]) delivered.push_back(w->seq);
      if (k < skip_rows) continue;
      if (on_pool) {
        std::unique_lock lock(d->mu);
        d->cv.wait(lock, [&] { return stop_.load() || d->left[k] == 0; });
        if (stop_.load()) return false;
      } else {
        for (const auto& w : d->rows[k]) decode_images(*w, /*account=*/false);
      }
      std::vector<std::unique_ptr<Work>> row;
      for (auto& w : d->rows[k]) {
        if (!w->error) {
          row.push_back(std::move(w));
          continue;
        }
        MMFEED_RETURN_IF_ERROR(budget_.fail(*w->error));
      }
      const bool last = k + 1 == d->rows.size();
      BatchEnd after = last ? BatchEnd{end, 0, {}} : BatchEnd{start, k + 1, delivered};
      if (!last) std::sort(after.window_delivered.begin(), after.window_delivered.end());
      if (row.empty()) continue;  // every sample of the row failed: the next batch's state covers it
      if (!sink({assemble(row, epoch, index++, std::move(after))})) return false;
    }
    return true;
  }

  // ---- serial mode: everything on the caller's thread, one sample after another -------------
  Result<std::optional<Batch>> next_serial() {
    if (stop_.load()) return std::optional<Batch>();
    if (!serial_ready_.empty()) {
      Batch b = std::move(serial_ready_.front().batch);
      serial_ready_.pop_front();
      return std::optional<Batch>(std::move(b));
    }
    std::vector<std::unique_ptr<Work>> samples;
    std::uint64_t start = serial_seq_;
    while (samples.size() < group_size()) {
      if (serial_epoch_ >= config_.epochs) break;
      if (serial_loaded_epoch_ != serial_epoch_) {
        serial_order_ = order(serial_epoch_);
        serial_loaded_epoch_ = serial_epoch_;
        serial_seq_ = 0;
        serial_batch_ = 0;
        start = 0;
      }
      if (serial_seq_ >= serial_order_.size()) {
        if (!samples.empty()) break;  // the epoch's last, partial group
        ++serial_epoch_;
        continue;
      }
      auto w = prepare(serial_epoch_, serial_seq_, serial_order_[serial_seq_]);
      ++serial_seq_;
      for (std::size_t i = 0; !w->error && i < w->images.size(); ++i) {
        if (!fetcher_->submit({w->images[i], i, std::nullopt})) return std::optional<Batch>();
        auto r = fetcher_->next();
        if (!r) return std::optional<Batch>();
        if (!r->data.ok()) {
          w->error = SampleError{w->id, "fetch", fetch_failure(r->data.error()), r->data.error().code()};
        } else {
          w->bytes[i] = std::move(r->data).value();
        }
      }
      if (!w->error) process(*w, /*defer_images=*/config_.token_budget > 0);
      MMFEED_RETURN_IF_ERROR(account(*w));
      if (!w->error) samples.push_back(std::move(w));
    }
    if (samples.empty()) {  // the run is over
      ended_.store(true);
      count_duplicate_ids();
      if (!final_checked_) {
        final_checked_ = true;
        if (Status st = budget_.at_end(); !st.ok()) {
          std::lock_guard lock(fail_mu_);
          failure_ = std::move(st).error();
        }
      }
      std::lock_guard lock(fail_mu_);
      if (failure_) return *failure_;
      return std::optional<Batch>();
    }
    const int epoch = samples.front()->epoch;
    MMFEED_RETURN_IF_ERROR(build_batches(std::move(samples), epoch, start, serial_seq_, 0, serial_batch_,
                                         [&](Built built) {
                                           serial_ready_.push_back(std::move(built));
                                           return true;
                                         }));
    if (serial_ready_.empty()) return next_serial();  // every sample of the group failed late
    Batch b = std::move(serial_ready_.front().batch);
    serial_ready_.pop_front();
    return std::optional<Batch>(std::move(b));
  }

  // ---- concurrent mode ---------------------------------------------------------------------
  // reader: parses lines, submits fetches (a window of samples ahead); collector: gathers
  // fetched bytes per sample and hands complete samples to the CPU pool; pool: processes;
  // batcher: takes results in order and assembles batches into the prefetch queue.
  void start_threads() {
    window_ = std::max<std::size_t>(config_.batch_size * (config_.prefetch_batches + 2), 16);
    pool_ = std::make_unique<core::ThreadPool>("process", static_cast<std::size_t>(std::max(1, config_.workers)),
                                               window_ + 16);
    reader_ = std::thread([this] { run_reader(); });
    collector_ = std::thread([this] { run_collector(); });
    batcher_ = std::thread([this] { run_batcher(); });
  }


  void finish(std::unique_ptr<Work> w) {
    if (!serial_) {
      unprocessed_.fetch_sub(1);
      if (!w->error) {
        sample_bytes_total_.fetch_add(w->held);
        samples_measured_.fetch_add(1);
      }
      { std::lock_guard lock(window_mu_); }
      window_cv_.notify_all();
    }
    {
      std::lock_guard lock(ready_mu_);
      ready_[key(w->epoch, w->seq)] = std::move(w);
    }
    ready_cv_.notify_all();
  }

  void run_reader() {
    core::set_current_thread_name("read");
    LoaderState start = state();
    std::uint64_t tag = 0;
    for (int epoch = start.epoch; epoch < config_.epochs && !stop_.load(); ++epoch) {
      const std::vector<std::uint64_t> ord = order(epoch);
      {
        std::lock_guard lock(ready_mu_);
        epoch_sizes_[epoch] = ord.size();
      }
      ready_cv_.notify_all();
      for (std::uint64_t seq = epoch == start.epoch ? start.position : 0; seq < ord.size(); ++seq) {
        {
          std::unique_lock lock(window_mu_);
          window_cv_.wait(lock, [&] { return stop_.load() || in_flight_ == 0 || (in_flight_ < window_ && room_for_sample()); });
          if (stop_.load()) return;
          ++in_flight_;
        }
        unprocessed_.fetch_add(1);
        auto w = prepare(epoch, seq, ord[seq]);
        if (w->error || w->images.empty()) {
          submit_processing(std::move(w));
          continue;
        }
        Work* raw = w.get();
        std::vector<std::uint64_t> tags;
        {
          std::lock_guard lock(pending_mu_);
          for (std::size_t i = 0; i < raw->images.size(); ++i) {
            tags.push_back(tag);
            pending_[tag++] = {raw, i};
          }
          owned_[raw] = std::move(w);
        }
        for (std::size_t i = 0; i < raw->images.size(); ++i) {
          if (!fetcher_->submit({raw->images[i], tags[i], std::nullopt})) return;
        }
      }
    }
    {
      std::lock_guard lock(ready_mu_);
      reader_done_ = true;
    }
    ready_cv_.notify_all();
    fetcher_->close();
  }

  void run_collector() {
    core::set_current_thread_name("collect");
    while (auto r = fetcher_->next()) {
      std::unique_ptr<Work> complete;
      {
        std::lock_guard lock(pending_mu_);
        auto it = pending_.find(r->tag);
        if (it == pending_.end()) continue;
        auto [w, index] = it->second;
        pending_.erase(it);
        if (!r->data.ok()) {
          if (!w->error) w->error = SampleError{w->id, "fetch", fetch_failure(r->data.error()), r->data.error().code()};
        } else {
          w->bytes[index] = std::move(r->data).value();
          hold(*w, static_cast<std::int64_t>(w->bytes[index].capacity()));
        }
        if (++w->arrived == w->images.size()) {
          complete = std::move(owned_[w]);
          owned_.erase(w);
        }
      }
      if (complete) submit_processing(std::move(complete));
    }
  }

  void submit_processing(std::unique_ptr<Work> w) {
    if (w->error) {
      finish(std::move(w));
      return;
    }
    // The CPU takes the earliest sample fetched, not the first fetched: the next batch needs
    // the samples at the front of the order, and fetches complete in any order.
    {
      std::lock_guard lock(fetched_mu_);
      fetched_.emplace(key(w->epoch, w->seq), std::move(w));
    }
    pool_->submit([this] {
      std::unique_ptr<Work> next;
      {
        std::lock_guard lock(fetched_mu_);
        if (fetched_.empty()) return;  // cannot happen: one task per sample queued
        next = std::move(fetched_.begin()->second);
        fetched_.erase(fetched_.begin());
      }
      process(*next, /*defer_images=*/config_.token_budget > 0);
      finish(std::move(next));
    });
  }

  void run_batcher() {
    core::set_current_thread_name("batch");
    LoaderState start = state();
    int epoch = start.epoch;
    std::uint64_t seq = start.position;
    std::uint64_t index = 0;
    std::uint64_t group_start = seq;
    std::uint64_t skip_rows = start.packed_delivered;  // resuming inside a packed window
    std::vector<std::unique_ptr<Work>> samples;
    auto emit = [&](std::uint64_t end) -> bool {
      if (samples.empty()) {
        group_start = end;
        return true;
      }
      auto built = build_batches(std::move(samples), epoch, group_start, end, skip_rows, index, [&](Built built) {
        const auto bytes = static_cast<std::int64_t>(built.batch.storage->capacity());
        // Over the byte budget, wait until the trainer has taken what is queued.
        {
          std::unique_lock lock(window_mu_);
          window_cv_.wait(lock, [&] {
            return stop_.load() || out_.size() == 0 ||
                   buffered_.load() + bytes <= static_cast<std::int64_t>(config_.max_buffered_bytes);
          });
        }
        buffered_.fetch_add(bytes);
        if (!out_.push(std::move(built.batch))) return false;
        trace_.counter("prefetched batches", static_cast<double>(out_.size()));
        m_prefetched_->set(static_cast<std::int64_t>(out_.size()));
        return true;
      });
      if (!built.ok()) {
        {
          std::lock_guard lock(fail_mu_);
          failure_ = std::move(built).error();
        }
        out_.close();
        return false;
      }
      if (!*built) return false;
      samples.clear();
      skip_rows = 0;
      group_start = end;
      return true;
    };
    // Ordered: the next sample of the order. Unordered: any finished sample of the epoch.
    auto next_ready = [&] {
      if (config_.ordered) return ready_.find(key(epoch, seq));
      auto it = ready_.lower_bound(key(epoch, 0));
      return it != ready_.end() && it->first < key(epoch + 1, 0) ? it : ready_.end();
    };
    while (!stop_.load()) {
      std::unique_ptr<Work> w;
      {
        std::unique_lock lock(ready_mu_);
        ready_cv_.wait(lock, [&] {
          return stop_.load() || next_ready() != ready_.end() ||
                 (epoch_sizes_.count(epoch) && seq >= epoch_sizes_[epoch]) || (reader_done_ && !epoch_sizes_.count(epoch));
        });
        if (stop_.load()) break;
        if (auto it = next_ready(); it != ready_.end()) {
          w = std::move(it->second);
          ready_.erase(it);
        } else if (epoch_sizes_.count(epoch) && seq >= epoch_sizes_[epoch]) {
          lock.unlock();
          if (!emit(seq)) break;  // the epoch's last, partial batch
          ++epoch;
          seq = 0;
          group_start = 0;
          index = 0;
          if (epoch >= config_.epochs) {
            ended_.store(true);
            count_duplicate_ids();
            if (Status st = budget_.at_end(); !st.ok()) {
              std::lock_guard lock(fail_mu_);
              failure_ = std::move(st).error();
            }
            break;
          }
          continue;
        } else {
          break;  // reader finished without this epoch
        }
      }
      {
        std::lock_guard lock(window_mu_);
        --in_flight_;
      }
      window_cv_.notify_all();
      ++seq;
      release(*w);
      Status st = account(*w);
      if (!st.ok()) {
        {
          std::lock_guard lock(fail_mu_);
          failure_ = std::move(st).error();
        }
        out_.close();
        return;
      }
      if (!w->error) samples.push_back(std::move(w));
      if (samples.size() == group_size() && !emit(seq)) break;
    }
    out_.close();
  }

  Result<std::optional<Batch>> next_concurrent(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) {
    auto b = timeout ? out_.pop_for(*timeout) : out_.pop();
    if (!b && timeout && !out_.closed()) {
      *timed_out = true;
      return std::optional<Batch>();
    }
    if (b) {
      buffered_.fetch_sub(static_cast<std::int64_t>(b->storage->capacity()));
      { std::lock_guard lock(window_mu_); }
      window_cv_.notify_all();
      m_buffered_->set(buffered_.load());
      m_prefetched_->set(static_cast<std::int64_t>(out_.size()));
      return std::optional<Batch>(std::move(*b));
    }
    std::lock_guard lock(fail_mu_);
    if (failure_) return *failure_;
    return std::optional<Batch>();
  }

  const LoaderConfig config_;
  const bool serial_;
  const bool fail_on_error_;
  const pipeline::ShardRemainder remainder_;
  const Manifests manifests_;
  const TokenizerFuture tok_;
  vision::ImageProcessor proc_;
  const text::ChatTemplate tmpl_;
  const text::SftOptions sft_;
  const storage::S3Options s3_;
  std::int64_t waited_ns_ = 0;  // timed-out waits of next_for, not yet recorded
  core::MetricsRegistry metrics_;
  mutable core::TraceWriter trace_;
  core::Histogram *m_wait_, *m_process_, *m_decode_, *m_assemble_;
  const core::Stopwatch opened_;  // wall time since open, for the stages' busy shares
  core::Counter *m_batches_, *m_duplicate_ids_;
  pipeline::ErrorBudget budget_{fail_on_error_, config_.max_error_fraction, metrics_};
  std::vector<std::size_t> id_hashes_;  // the first epoch's sample ids, hashed (note_id)
  core::Gauge *m_buffered_, *m_prefetched_;
  // Released batch buffers are kept for reuse up to half the byte budget: in steady state the
  // trainer releases one batch as the batcher needs the next, so a few suffice.
  // Pinned (page-locked) when asked and a CUDA runtime is present, so copies to the GPU are fast.
  std::size_t high_water_ = 0;  // the largest batch buffer so far (assemble() only)
  const int pin_device_ =
      device::choose_pin_device(config_.pin_device, std::getenv("LOCAL_RANK"), device::CudaRuntime::get().device_count());
  const std::shared_ptr<core::Allocator> batch_allocator_ =
      config_.pin_memory && device::CudaRuntime::get().available()
          ? device::host_allocator(pin_device_, std::make_shared<core::ThreadPool>("cuda-pin", 1))
          : core::heap_allocator();
  core::BufferPool pool_buffers_{core::BufferPoolOptions{
      .alignment = 64, .max_cached_bytes = config_.max_buffered_bytes / 2, .allocator = batch_allocator_}};

  // Where batch buffers come from, for metrics(): pinned (on which device, and how many blocks
  // the runtime refused to page-lock), or pageable and why.
  std::string describe_batch_memory() const {
    if (!config_.pin_memory) return "pageable (pin_memory off)";
    std::string text = device::CudaRuntime::get().describe();
    if (const auto* pinned = dynamic_cast<const device::PinnedAllocator*>(batch_allocator_.get())) {
      text += " on device " + std::to_string(pin_device_);
      if (const std::size_t refused = pinned->pageable_blocks(); refused > 0) {
        text += " (" + std::to_string(refused) + " buffers pageable: cudaHostAlloc refused them)";
      }
    }
    return text;
  }
  std::unique_ptr<storage::Fetcher> fetcher_;
  std::unique_ptr<core::ThreadPool> pool_;

  mutable std::mutex state_mu_;
  LoaderState delivered_;
  const LoaderState start_;
  std::map<std::uint64_t, BatchEnd> batch_end_;  // batch -> the state after it


  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};
  core::BoundedQueue<Batch> out_;
  std::mutex fail_mu_;
  std::optional<Error> failure_;
  bool final_checked_ = false;  // serial mode: the end-of-run budget check is done
  std::atomic<bool> ended_{false};  // every epoch was delivered (or the run failed): not a close()

  // Concurrent stages.
  std::thread reader_, collector_, batcher_;
  std::size_t window_ = 0;
  std::mutex window_mu_;
  std::condition_variable window_cv_;
  std::size_t in_flight_ = 0;
  mutable std::atomic<std::int64_t> buffered_{0};
  std::atomic<std::int64_t> unprocessed_{0};          // admitted, not yet processed
  std::atomic<std::int64_t> sample_bytes_total_{0};   // bytes held by processed samples, summed
  std::atomic<std::int64_t> samples_measured_{0};
  std::mutex pending_mu_;
  std::map<std::uint64_t, std::pair<Work*, std::size_t>> pending_;  // fetch tag -> (sample, image)
  std::map<Work*, std::unique_ptr<Work>> owned_;
  std::mutex fetched_mu_;
  std::map<std::uint64_t, std::unique_ptr<Work>> fetched_;  // fetched, waiting for a CPU worker
  std::mutex ready_mu_;
  std::condition_variable ready_cv_;
  std::map<std::uint64_t, std::unique_ptr<Work>> ready_;
  std::map<int, std::uint64_t> epoch_sizes_;
  bool reader_done_ = false;

  // Serial mode.
  int serial_epoch_ = 0;
  int serial_loaded_epoch_ = -1;
  std::uint64_t serial_seq_ = 0;
  std::uint64_t serial_batch_ = 0;
  std::vector<std::uint64_t> serial_order_;
  std::deque<Built> serial_ready_;
};

}  // namespace

Result<std::unique_ptr<Loader>> Loader::open(const LoaderConfig& config, std::optional<LoaderState> resume) {
  MMFEED_ASSIGN_OR_RETURN(pipeline::Settings settings, pipeline::check_config(config));
  MMFEED_ASSIGN_OR_RETURN(storage::S3Options s3, storage::s3_options_from_environment());
  TokenizerFuture tok;
  try {
    tok = load_tokenizer(config.tokenizer);
  } catch (const std::system_error& e) {
    return Error(ErrorCode::kResourceExhausted, std::string("cannot start a thread to load the tokenizer: ") + e.what());
  }
  MMFEED_ASSIGN_OR_RETURN(Manifests manifests, dataset::read_manifests(config.manifests, config.max_manifest_bytes, s3));
  MMFEED_ASSIGN_OR_RETURN(LoaderState start, pipeline::start_state(config, settings.remainder, manifests, resume));
  // The loader starts fetching while the tokenizer loads; a tokenizer that fails to load still
  // fails open().
  std::unique_ptr<LoaderImpl> loader;
  try {
    loader = std::make_unique<LoaderImpl>(std::move(settings), std::move(manifests), tok, std::move(s3), start);
  } catch (const std::system_error& e) {  // the fetcher's threads
    return Error(ErrorCode::kResourceExhausted, std::string("cannot start the fetch threads: ") + e.what());
  }
  MMFEED_RETURN_IF_ERROR(loader->start());
  if (const auto& loaded = tok.get(); !loaded.ok()) return loaded.error();
  return std::unique_ptr<Loader>(std::move(loader));
}

}  // namespace mmfeed
