#include "pipeline/batch_builder.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "core/clock.h"
#include "pipeline/assembler.h"
#include "pipeline/packer.h"

namespace mmfeed::pipeline {

BatchBuilder::BatchBuilder(const LoaderConfig& config, const SampleProcessor& processor, ErrorBudget& errors,
                           Progress& progress, core::BufferPool& buffers, core::MetricsRegistry& metrics,
                           core::TraceWriter* trace)
    : config_(config),
      processor_(processor),
      errors_(errors),
      progress_(progress),
      buffers_(buffers),
      trace_(trace),
      assemble_ns_(metrics.histogram("loader.assemble_batch_ns")) {}

std::size_t BatchBuilder::group_size() const {
  return config_.token_budget > 0 ? config_.pack_window : config_.batch_size;
}

Batch BatchBuilder::assemble(const std::vector<std::unique_ptr<Work>>& samples, int epoch, std::uint64_t index,
                             BatchEnd after) {
  core::TraceSpan span(trace_, "assemble batch", "batch");
  const core::Stopwatch sw;
  const BatchLayout layout{.packed = config_.token_budget > 0,
                           .pad_to_multiple_of = config_.pad_to_multiple_of,
                           .mrope = config_.mrope,
                           .pad_id = processor_.pad_id()};  // loaded: every sample was tokenized
  Batch b = assemble_batch(samples, layout, processor_.images(), buffers_, high_water_);
  b.epoch = epoch;
  b.index = index;
  progress_.formed(epoch, index, std::move(after));
  assemble_ns_.record(static_cast<std::uint64_t>(sw.elapsed_ns()));
  return b;
}

std::vector<std::vector<std::unique_ptr<Work>>> BatchBuilder::pack(std::vector<std::unique_ptr<Work>> window) const {
  std::vector<std::size_t> lengths;
  for (const auto& w : window) lengths.push_back(w->input_ids.size());
  std::vector<std::vector<std::unique_ptr<Work>>> rows;
  for (const std::vector<std::size_t>& row : pack_rows(lengths, config_.token_budget)) {
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
  if (config_.token_budget == 0) return sink(assemble(samples, epoch, index++, BatchEnd{end, 0, {}}));
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
              processor_.decode_images(*sample, /*account=*/false);
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
      for (const auto& w : d->rows[k]) processor_.decode_images(*w, /*account=*/false);
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
    if (!sink(assemble(row, epoch, index++, std::move(after)))) return false;
  }
  return true;
}

}  // namespace mmfeed::pipeline
