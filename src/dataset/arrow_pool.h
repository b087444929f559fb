// An Arrow memory pool that holds at most a limit at once, for the Parquet reader (parquet.cc).
// Arrow's and Parquet's decoders take every decompressed page, dictionary and decoded column
// from their pool, so a size a file understates -- a 27 KB page that inflates to 800 MB, one
// dictionary value that 400,000 rows reference -- is refused when it is asked for, before any of
// it is committed, and the reader reports the limit instead of the system running out of memory.
// The sizes a footer states are checked before reading too; this counts what is really held.
//
// Thread-safe: one source's files are read on several threads against one limit.
//
// Example:
//   LimitedPool pool(limit);
//   parquet::ReaderProperties props(&pool);  // pages decompressed from `pool`
//   ... read; on an Arrow error, pool.refused() > 0 says the limit stopped it.
#pragma once

#include <arrow/memory_pool.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace mmfeed::dataset {

class LimitedPool final : public arrow::MemoryPool {
 public:
  explicit LimitedPool(std::int64_t limit, arrow::MemoryPool* wrapped = arrow::default_memory_pool());

  using arrow::MemoryPool::Allocate;
  using arrow::MemoryPool::Free;
  using arrow::MemoryPool::Reallocate;

  arrow::Status Allocate(std::int64_t size, std::int64_t alignment, std::uint8_t** out) override;
  arrow::Status Reallocate(std::int64_t old_size, std::int64_t new_size, std::int64_t alignment,
                           std::uint8_t** ptr) override;
  void Free(std::uint8_t* buffer, std::int64_t size, std::int64_t alignment) override;

  std::int64_t bytes_allocated() const override { return held_.load(); }
  std::int64_t max_memory() const override { return wrapped_->max_memory(); }
  std::int64_t total_bytes_allocated() const override { return wrapped_->total_bytes_allocated(); }
  std::int64_t num_allocations() const override { return wrapped_->num_allocations(); }
  std::string backend_name() const override { return wrapped_->backend_name(); }

  std::int64_t limit() const { return limit_; }
  // What may still be taken.
  std::int64_t left() const { return limit_ - held_.load(); }
  // Counts `bytes` held outside Arrow (the rows' text a reader writes) against the same limit:
  // false, counting nothing, when that passes it.
  bool charge(std::int64_t bytes) { return take(bytes, /*record=*/false); }
  // What was held plus what Arrow asked for, at its first request refused; 0 while none was.
  std::int64_t refused() const { return refused_.load(); }

 private:
  // Counts `bytes` more as held, unless that passes the limit (an Arrow request refused is
  // `record`ed for refused()).
  bool take(std::int64_t bytes, bool record = true);

  arrow::MemoryPool* wrapped_;
  const std::int64_t limit_;
  std::atomic<std::int64_t> held_{0};
  std::atomic<std::int64_t> refused_{0};
};

}  // namespace mmfeed::dataset
