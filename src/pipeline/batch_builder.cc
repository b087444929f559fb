#include "pipeline/batch_builder.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "core/clock.h"
#include "pipeline/assembler.h"
#include "pipeline/config.h"
#include "pipeline/packer.h"

namespace mmfeed::pipeline {

BatchBuilder::BatchBuilder(const BatchOptions& options, const SampleProcessor& processor, ErrorBudget& errors,
                           Progress& progress, core::BufferPool& buffers, core::MetricsRegistry& metrics,
                           core::TraceWriter* trace)
    : options_(options),
      processor_(processor),
      errors_(errors),
      progress_(progress),
      buffers_(buffers),
      trace_(trace),
      assemble_ns_(metrics.histogram("loader.assemble_batch_ns")),
      pixels_ns_(metrics.histogram("loader.write_pixels_ns")) {}

std::size_t BatchBuilder::group_size() const { return options_.group_positions; }

Batch BatchBuilder::assemble(const std::vector<std::unique_ptr<Work>>& samples, int epoch, std::uint64_t index,
                             BatchEnd after, core::ThreadPool* cpu) {
  AssembledBatch assembled;
  {
    core::TraceSpan span(trace_, "assemble batch", "batch");
    const core::Stopwatch sw;
    const LoadedTokenizer& tok = processor_.tokenizer();  // loaded: every sample was tokenized
    const BatchLayout layout{.packed = options_.packing.token_budget > 0,
                             .format = options_.packing.format,
                             .pad_to_multiple_of = options_.packing.pad_to_multiple_of,
                             .mrope = options_.mrope,
                             .pad_id = tok.pad_id,
                             .image_pad_id = tok.image_pad_id,
                             .video_pad_id = tok.video_pad_id,
                             .audio_pad_id = tok.audio_pad_id,
                             .second_per_grid_ts = processor_.model().tokens_per_second > 0,
                             .omni = processor_.audio_model().has_value(),
                             .audio_padding = audio_padding(),
                             .seq_idx = processor_.model().linear_attention};
    assembled = assemble_batch(samples, layout, processor_.images(), processor_.videos(), buffers_);
    assemble_ns_.record(static_cast<std::uint64_t>(sw.elapsed_ns()));
  }
  write_all_pixels(std::move(assembled.pixels), cpu);
  Batch& b = assembled.batch;
  b.epoch = epoch;
  b.index = index;
  progress_.formed(epoch, index, std::move(after));
  return std::move(b);
}

AudioPadding BatchBuilder::audio_padding() const {
  const auto& audio = processor_.audio_model();
  if (options_.audio_padding == AudioPadding::kModel && audio && audio->pads_to_longest) return AudioPadding::kLongest;
  return options_.audio_padding;
}

// The jobs go to up to `workers` pool tasks, put ahead of the queue: each takes the next job until
// none is left, so the batch's pixels are written by every worker that comes free and never wait
// behind the queue. This thread only waits: `workers` is the loader's whole CPU budget, and the
// core "auto" leaves the trainer stays its. It writes jobs itself only where the pool takes no
// more tasks (shut down) or there is none (`cpu` null); a task that starts late finds none left
// and touches only the shared counters.
void BatchBuilder::write_all_pixels(std::vector<PixelJob> jobs, core::ThreadPool* cpu) {
  struct Shared {
    std::vector<PixelJob> jobs;
    std::atomic<std::size_t> next{0};
    std::size_t done = 0;  // guarded by mu
    std::mutex mu;
    std::condition_variable cv;
  };
  auto shared = std::make_shared<Shared>();
  shared->jobs = std::move(jobs);
  const std::size_t n = shared->jobs.size();
  auto work = [this](Shared& s) {
    for (std::size_t i = s.next.fetch_add(1); i < s.jobs.size(); i = s.next.fetch_add(1)) {
      core::TraceSpan span(trace_, "write pixels", "cpu");
      const core::Stopwatch sw;
      write_pixels(s.jobs[i], processor_.images(), processor_.videos());
      pixels_ns_.record(static_cast<std::uint64_t>(sw.elapsed_ns()));
      {
        std::lock_guard lock(s.mu);
        ++s.done;
      }
      s.cv.notify_all();
    }
  };
  bool queued = false;
  if (cpu != nullptr) {
    const std::size_t tasks = std::min(n, static_cast<std::size_t>(options_.workers));
    for (std::size_t k = 0; k < tasks; ++k) {
      if (!cpu->submit_first([shared, work] { work(*shared); })) break;
      queued = true;
    }
  }
  // A task queued runs even through shutdown (ThreadPool runs what was queued before joining),
  // so waiting for it ends.
  if (!queued) work(*shared);
  std::unique_lock lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->done == n; });
}

std::vector<std::vector<std::unique_ptr<Work>>> BatchBuilder::pack(std::vector<std::unique_ptr<Work>> window) const {
  std::vector<std::size_t> lengths;
  for (const auto& w : window) {
    lengths.push_back(packed_span(w->input_ids.size(), options_.packing.format, options_.packing.pad_to_multiple_of));
  }
  std::vector<std::vector<std::unique_ptr<Work>>> rows;
  for (const std::vector<std::size_t>& row : pack_rows(lengths, options_.packing.token_budget)) {
    rows.emplace_back();
    for (std::size_t i : row) rows.back().push_back(std::move(window[i]));
  }
  return rows;
}

// The state after each row: after the window for its last row, else the window's start with the
// rows already delivered (and the positions they held, sorted).
Result<bool> BatchBuilder::build(std::vector<std::unique_ptr<Work>> samples, int epoch, std::uint64_t start,
                                 std::uint64_t end, std::uint64_t skip_rows, std::uint64_t& index,
                                 core::ThreadPool* cpu, const std::atomic<bool>& stop, const Sink& sink) {
  if (options_.packing.token_budget == 0) return sink(assemble(samples, epoch, index++, BatchEnd{end, 0, {}}, cpu));
  struct Decoding {
    std::vector<std::vector<std::unique_ptr<Work>>> rows;
    std::vector<std::size_t> left;  // per row: samples still being decoded
    std::mutex mu;
    std::condition_variable cv;
  };
  auto d = std::make_shared<Decoding>();
  d->rows = pack(std::move(samples));
  d->left.assign(d->rows.size(), 0);
  if (cpu != nullptr) {
    for (std::size_t k = skip_rows; k < d->rows.size(); ++k) d->left[k] = d->rows[k].size();
    for (std::size_t k = skip_rows; k < d->rows.size(); ++k) {
      for (const auto& w : d->rows[k]) {
        // The task keeps the rows alive: the builder may stop before it runs.
        if (!cpu->submit([this, d, k, sample = w.get()] {
              processor_.decode_media(*sample, /*account=*/false);
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
    if (cpu != nullptr) {
      std::unique_lock lock(d->mu);
      d->cv.wait(lock, [&] { return stop.load() || d->left[k] == 0; });
      if (stop.load()) return false;
    } else {
      for (const auto& w : d->rows[k]) processor_.decode_media(*w, /*account=*/false);
    }
    std::vector<std::unique_ptr<Work>> row;
    for (auto& w : d->rows[k]) {
      if (!w->error) {
        row.push_back(std::move(w));
        continue;
      }
      MMFEED_RETURN_IF_ERROR(errors_.fail(*w->error));
    }
    const bool last = k + 1 == d->rows.size();
    BatchEnd after = last ? BatchEnd{end, 0, {}} : BatchEnd{start, k + 1, delivered};
    if (!last) std::sort(after.window_delivered.begin(), after.window_delivered.end());
    if (row.empty()) continue;  // every sample of the row failed: the next batch's state covers it
    if (!sink(assemble(row, epoch, index++, std::move(after), cpu))) return false;
  }
  return true;
}

}  // namespace mmfeed::pipeline
