// The Loader: wires the stages (docs/ARCHITECTURE.md) and hands their batches to the trainer.
// Each stage is a file of its own in this folder; this one builds them from the checked
// configuration, picks the driver (serial_driver.h or concurrent_driver.h) and keeps what the
// trainer sees: the batches, the resume state, the errors and the metrics.
#include "mmfeed/loader.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <system_error>

#include "core/clock.h"
#include "core/metrics.h"
#include "core/trace.h"
#include "dataset/manifest.h"
#include "pipeline/balance.h"
#include "pipeline/batch_builder.h"
#include "pipeline/batch_memory.h"
#include "pipeline/concurrent_driver.h"
#include "pipeline/config.h"
#include "pipeline/device_copy.h"
#include "pipeline/error_budget.h"
#include "pipeline/inputs.h"
#include "pipeline/memory_budget.h"
#include "pipeline/order.h"
#include "pipeline/progress.h"
#include "pipeline/resume_state.h"
#include "pipeline/sample_processor.h"
#include "pipeline/serial_driver.h"
#include "storage/credentials.h"
#include "storage/fetcher.h"

namespace mmfeed {

std::size_t Tensor::bytes() const {
  std::size_t n = 1;
  switch (dtype) {
    case DType::kInt64: n = 8; break;
    case DType::kFloat32: n = 4; break;
    case DType::kBFloat16: n = 2; break;
    case DType::kUInt8: n = 1; break;
    case DType::kInt32: n = 4; break;
  }
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::string_view dtype_name(Tensor::DType dtype) {
  switch (dtype) {
    case Tensor::DType::kInt64: return "int64";
    case Tensor::DType::kFloat32: return "float32";
    case Tensor::DType::kBFloat16: return "bfloat16";
    case Tensor::DType::kUInt8: return "uint8";
    case Tensor::DType::kInt32: return "int32";
  }
  return "unknown";
}

const Tensor* Batch::find(std::string_view name) const {
  for (const Tensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Loader::~Loader() = default;

namespace {

using pipeline::TokenizerFuture;

storage::FetchOptions fetch_options(const LoaderConfig& config, bool serial) {
  storage::FetchOptions fo;
  fo.max_inflight = serial ? 1 : config.fetch_inflight;
  fo.max_pending_results = std::max<std::size_t>(fo.max_inflight * 2, 16);
  // What is being fetched counts against the byte budget too, not only what has arrived: no
  // object may outgrow the budget, and the bytes in-flight requests hold stay under it.
  fo.max_object_bytes = std::min(config.max_object_bytes, config.max_buffered_bytes);
  if (config.max_buffered_bytes < config.max_object_bytes) fo.max_object_bytes_option = "max_buffered_bytes";
  fo.max_inflight_bytes = config.max_buffered_bytes;
  return fo;
}

// Members are declared in the order they are built: each stage after what it refers to.
class LoaderImpl final : public Loader {
 public:
  LoaderImpl(pipeline::Settings settings, std::shared_ptr<const LoaderInputs> inputs, storage::S3Options s3,
             pipeline::Population population, LoaderState start)
      : settings_(std::move(settings)),
        config_(settings_.options),
        inputs_(std::move(inputs)),
        s3_(std::move(s3)),
        trace_(core::TraceOptions{.enabled = !config_.trace_path.empty(), .max_events = 1 << 22}),
        fetcher_(fetch_options(config_, serial_), s3_, &metrics_, trace_.enabled() ? &trace_ : nullptr),
        memory_(serial_ ? nullptr : pipeline::memory_budget_for(settings_.drive)),
        errors_(config_.on_error == OnError::kFail, config_.max_error_fraction, metrics_),
        progress_(start),
        batch_memory_(config_),
        processor_(settings_, manifests_, inputs_->data().tokenizer, memory_.get(), metrics_, &trace_),
        builder_(settings_.batch, processor_, errors_, progress_, batch_memory_.pool(), metrics_, &trace_) {
    const pipeline::Stages stages{.settings = settings_,
                                  .population = std::move(population),
                                  .start = start,
                                  .processor = processor_,
                                  .builder = builder_,
                                  .errors = errors_,
                                  .fetcher = fetcher_,
                                  .memory = memory_.get(),
                                  .metrics = metrics_,
                                  .trace = &trace_};
    // The manifests this run's reading indexed into cache_dir (the node's first reader of each).
    std::int64_t built = 0;
    for (const dataset::Manifest& m : manifests_.files) built += m.index_built ? 1 : 0;
    metrics_.counter("loader.indexes_built").add(built);
    if (serial_) {
      driver_ = std::make_unique<pipeline::SerialDriver>(stages);
    } else {
      driver_ = std::make_unique<pipeline::ConcurrentDriver>(stages);
    }
  }

  // Starts the concurrent mode's threads; a thread the system refuses is an error (what started
  // is stopped), not an abort.
  Status start() {
    auto* concurrent = dynamic_cast<pipeline::ConcurrentDriver*>(driver_.get());
    if (concurrent == nullptr) return ok_status();
    try {
      concurrent->start();
    } catch (const std::system_error& e) {
      static_cast<void>(close());  // the threads' failure is the error to report
      return Error(
          ErrorCode::kResourceExhausted,
          "cannot start " + std::to_string(config_.workers) + " worker threads: " + e.what() + "; give fewer workers",
          "LoaderConfig.workers");
    }
    return ok_status();
  }

  ~LoaderImpl() override { static_cast<void>(close()); }  // a caller who wants the trace's error closes first

  Result<std::optional<Batch>> next() override {
    bool timed_out = false;
    return next_impl(std::nullopt, &timed_out);
  }

  Result<std::optional<Batch>> next_for(std::chrono::milliseconds timeout, bool* timed_out,
                                        void* /*consumer_stream: host batches*/) override {
    return next_impl(timeout, timed_out);
  }

  LoaderState state() const override { return progress_.state(); }

  std::vector<SampleError> errors() const override { return errors_.errors(); }

  std::string metrics_json() const override {
    std::string json = metrics_.to_json();
    json.pop_back();  // add where batch memory comes from, and the stages' shares
    json += "," + batch_memory_.to_json();
    // Each stage's busy time, items, threads and share of their time since open (the CPU stages,
    // pixel rows included, run on `workers` threads; assembly — planning and the text tensors —
    // on the batcher alone; the consumer's share is its waiting).
    const double wall = std::max(opened_.elapsed_s(), 1e-9);
    const double workers = serial_ ? 1.0 : static_cast<double>(std::max(1, config_.workers));
    json += ",\"workers\":" + std::to_string(config_.workers);  // as resolved: workers = 0 is auto
    // The process's peak resident memory so far (the loader's share is loader.buffered_bytes's max).
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) == 0) json += ",\"peak_rss_bytes\":" + std::to_string(usage.ru_maxrss * 1024L);
    json += ",\"stages\":{\"wall_s\":" + std::to_string(wall);
    auto stage = [&](const char* name, const core::Histogram& histogram, double threads) {
      const core::HistogramSnapshot snap = histogram.snapshot();
      const double busy = static_cast<double>(snap.sum) / 1e9;
      json += ",\"" + std::string(name) + "\":{\"items\":" + std::to_string(snap.count) +
              ",\"threads\":" + std::to_string(static_cast<int>(threads)) + ",\"busy_s\":" + std::to_string(busy) +
              ",\"busy_share\":" + std::to_string(busy / (wall * threads)) + "}";
    };
    stage("process", process_ns_, workers);
    stage("decode", decode_ns_, workers);
    stage("pixels", pixels_ns_, workers);
    stage("assemble", assemble_ns_, 1.0);
    stage("consumer_wait", wait_ns_, 1.0);
    json += "}";
    return json + "}";
  }

  // The trace the loader writes at close(), when trace_path is set.
  core::TraceWriter* trace() { return trace_.enabled() ? &trace_ : nullptr; }

  Status close() override {
    std::lock_guard lock(close_mu_);
    if (closed_.exchange(true)) return closed_status_;
    driver_->stop();
    fetcher_.cancel();
    if (trace_.enabled()) closed_status_ = trace_.write_file(config_.trace_path);
    return closed_status_;
  }

 private:
  Result<std::optional<Batch>> next_impl(std::optional<std::chrono::milliseconds> timeout, bool* timed_out) {
    *timed_out = false;
    const core::Stopwatch wait;
    Result<std::optional<Batch>> r = Error(ErrorCode::kInternal, "unset");
    {
      core::TraceSpan span(&trace_, serial_ ? "next (serial work)" : "next (waiting)", "consumer");
      r = driver_->next(timeout, timed_out);
    }
    if (*timed_out) {  // a partial wait: counted with the call that gets the batch
      waited_ns_ += wait.elapsed_ns();
      return r;
    }
    if (r.ok() && !r->has_value() && closed_.load() && !driver_->ended()) {
      // close() before the data ended (from another thread while this call waited, perhaps): say
      // so, or the consumer would take it for the end of the data.
      return Error(ErrorCode::kCancelled, "the loader was closed (close() was called) before the end of its data");
    }
    wait_ns_.record(static_cast<std::uint64_t>(wait.elapsed_ns() + waited_ns_));
    waited_ns_ = 0;
    if (r.ok() && r->has_value()) {
      batches_.add();
      progress_.delivered(**r);
    }
    return r;
  }

  const pipeline::Settings settings_;
  const LoaderConfig& config_;
  const bool serial_ = config_.mode == Mode::kSerial;
  const std::shared_ptr<const LoaderInputs> inputs_;
  const dataset::Manifests& manifests_ = inputs_->data().manifests;
  const storage::S3Options s3_;
  core::MetricsRegistry metrics_;
  core::TraceWriter trace_;
  storage::Fetcher fetcher_;
  const std::unique_ptr<pipeline::MemoryBudget> memory_;  // the concurrent mode's
  pipeline::ErrorBudget errors_;
  pipeline::Progress progress_;
  pipeline::BatchMemory batch_memory_;
  const pipeline::SampleProcessor processor_;
  pipeline::BatchBuilder builder_;
  std::unique_ptr<pipeline::Driver> driver_;

  // The trainer's.
  const core::Stopwatch opened_;  // wall time since open, for the stages' busy shares
  core::Histogram& wait_ns_ = metrics_.histogram("loader.consumer_wait_ns");
  core::Counter& batches_ = metrics_.counter("loader.batches");
  // The stages' busy times, for metrics() (recorded by the processor and the builder).
  const core::Histogram& process_ns_ = metrics_.histogram("loader.process_sample_ns");
  const core::Histogram& decode_ns_ = metrics_.histogram("loader.decode_media_ns");
  const core::Histogram& assemble_ns_ = metrics_.histogram("loader.assemble_batch_ns");
  const core::Histogram& pixels_ns_ = metrics_.histogram("loader.write_pixels_ns");
  std::int64_t waited_ns_ = 0;       // timed-out waits of next_for, not yet recorded
  std::atomic<bool> closed_{false};  // read by next() on the trainer's thread without the lock
  std::mutex close_mu_;              // one close() does the work; a concurrent one waits for its status
  Status closed_status_;             // the trace's write, guarded by close_mu_
};

}  // namespace

namespace pipeline {
core::TraceWriter* trace_of(Loader& loader) {
  auto* impl = dynamic_cast<LoaderImpl*>(&loader);
  return impl != nullptr ? impl->trace() : nullptr;
}
}  // namespace pipeline

LoaderInputs::LoaderInputs(std::unique_ptr<const Data> data) : data_(std::move(data)) {}
LoaderInputs::~LoaderInputs() = default;

Result<std::shared_ptr<const LoaderInputs>> LoaderInputs::read(const LoaderConfig& config) {
  MMFEED_RETURN_IF_ERROR(pipeline::check_config(config));  // the same errors as open()'s, by field
  MMFEED_ASSIGN_OR_RETURN(storage::S3Options s3, storage::s3_options_from_environment());
  MMFEED_ASSIGN_OR_RETURN(std::shared_ptr<const LoaderInputs> inputs, pipeline::start_reading(config, s3));
  if (const auto& loaded = inputs->data().tokenizer.get(); !loaded.ok()) return loaded.error();
  return inputs;
}

Status LoaderInputs::check_serves(const LoaderConfig& config) const {
  auto differs = [](const std::string& field, const std::string& mine) {
    return pipeline::config_error(field, "differs from the LoaderInputs' (read for " + mine +
                                             "): open the loader with the options its inputs were read with");
  };
  if (config.manifests != data_->manifest_names) {
    std::string names;
    for (const std::string& m : data_->manifest_names) names += (names.empty() ? "" : ", ") + m;
    return differs("manifests", names);
  }
  if (config.tokenizer != data_->tokenizer_path) return differs("tokenizer", data_->tokenizer_path);
  if (config.max_manifest_bytes != data_->max_manifest_bytes) {
    return differs("max_manifest_bytes", std::to_string(data_->max_manifest_bytes));
  }
  return ok_status();
}

namespace pipeline {

Result<std::shared_ptr<const LoaderInputs>> start_reading(const LoaderConfig& config, const storage::S3Options& s3) {
  auto data = std::make_unique<LoaderInputs::Data>();
  data->manifest_names = config.manifests;
  data->tokenizer_path = config.tokenizer;
  data->max_manifest_bytes = config.max_manifest_bytes;
  try {
    data->tokenizer = load_tokenizer(config.tokenizer);
  } catch (const std::system_error& e) {
    return Error(ErrorCode::kResourceExhausted,
                 std::string("cannot start a thread to load the tokenizer: ") + e.what());
  }
  MMFEED_ASSIGN_OR_RETURN(
      data->manifests,
      dataset::read_manifests(config.manifests, config.max_manifest_bytes, s3,
                              {.use = true, .cache_dir = config.cache_dir, .media_root = config.media_root}));
  return std::make_shared<const LoaderInputs>(std::move(data));
}

}  // namespace pipeline

namespace {

constexpr std::size_t kStagedOnDevice = 2;  // device batches copied ahead of the trainer (cuda_device)

// `inputs` when given (checked against `config`), else the config's own, read now.
Result<std::shared_ptr<const LoaderInputs>> inputs_for(const LoaderConfig& config, const storage::S3Options& s3,
                                                       std::shared_ptr<const LoaderInputs> inputs) {
  if (inputs == nullptr) return pipeline::start_reading(config, s3);
  MMFEED_RETURN_IF_ERROR(inputs->check_serves(config));
  return inputs;
}

}  // namespace

Result<std::unique_ptr<Loader>> Loader::open(const LoaderConfig& config, std::optional<LoaderState> resume,
                                             std::shared_ptr<const LoaderInputs> given) {
  MMFEED_ASSIGN_OR_RETURN(pipeline::Settings settings, pipeline::check_config(config));
  if (!config.trace_path.empty()) {  // refused now, not after the run when the trace is written
    if (Status st = core::check_writable(config.trace_path); !st.ok()) {
      return Error(st.error().code(), st.error().to_string(), "LoaderConfig.trace_path");
    }
  }
  MMFEED_ASSIGN_OR_RETURN(storage::S3Options s3, storage::s3_options_from_environment());
  MMFEED_ASSIGN_OR_RETURN(std::shared_ptr<const LoaderInputs> inputs, inputs_for(config, s3, std::move(given)));
  MMFEED_ASSIGN_OR_RETURN(pipeline::Population population, pipeline::population_of(config, inputs->data().manifests));
  if (config.balance != Balance::kNone) {
    population.cost = pipeline::sample_costs(settings, inputs->data().manifests, inputs);
    population.model = pipeline::cost_model(config);
  }
  MMFEED_ASSIGN_OR_RETURN(LoaderState start,
                          pipeline::start_state(config, inputs->data().manifests, population, resume));
  // The loader starts fetching while the tokenizer loads; a tokenizer that fails to load still
  // fails open().
  const TokenizerFuture tok = inputs->data().tokenizer;
  std::unique_ptr<LoaderImpl> loader;
  try {
    loader = std::make_unique<LoaderImpl>(std::move(settings), std::move(inputs), std::move(s3), std::move(population),
                                          start);
  } catch (const std::system_error& e) {  // the fetcher's and the pinning threads
    return Error(ErrorCode::kResourceExhausted, std::string("cannot start the fetch threads: ") + e.what());
  }
  MMFEED_RETURN_IF_ERROR(loader->start());
  if (const auto& loaded = tok.get(); !loaded.ok()) return loaded.error();
  if (config.cuda_device >= 0) {
    return pipeline::on_device(std::move(loader), config.cuda_device, kStagedOnDevice, config.max_buffered_bytes / 2);
  }
  return std::unique_ptr<Loader>(std::move(loader));
}

Result<std::vector<std::uint64_t>> Loader::epoch_sizes(const LoaderConfig& config, std::optional<LoaderState> resume,
                                                       std::shared_ptr<const LoaderInputs> inputs) {
  MMFEED_ASSIGN_OR_RETURN(pipeline::Settings settings, pipeline::check_config(config));
  const dataset::Manifests* manifests = nullptr;
  dataset::Manifests read;
  if (inputs != nullptr) {
    MMFEED_RETURN_IF_ERROR(inputs->check_serves(config));
    manifests = &inputs->data().manifests;
  } else {  // the manifests alone: no tokenizer is needed to count
    MMFEED_ASSIGN_OR_RETURN(storage::S3Options s3, storage::s3_options_from_environment());
    MMFEED_ASSIGN_OR_RETURN(
        read, dataset::read_manifests(config.manifests, config.max_manifest_bytes, s3,
                                      {.use = true, .cache_dir = config.cache_dir, .media_root = config.media_root}));
    manifests = &read;
  }
  MMFEED_ASSIGN_OR_RETURN(pipeline::Population population, pipeline::population_of(config, *manifests));
  MMFEED_ASSIGN_OR_RETURN(LoaderState start, pipeline::start_state(config, *manifests, population, resume));
  std::vector<std::uint64_t> sizes;
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    sizes.push_back(pipeline::run_order(population, settings.order, start, epoch).size());
  }
  return sizes;
}

}  // namespace mmfeed
