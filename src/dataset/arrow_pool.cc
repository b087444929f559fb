#include "dataset/arrow_pool.h"

namespace mmfeed::dataset {

LimitedPool::LimitedPool(std::int64_t limit, arrow::MemoryPool* wrapped) : wrapped_(wrapped), limit_(limit) {}

bool LimitedPool::take(std::int64_t bytes, bool record) {
  std::int64_t held = held_.load();
  do {
    if (bytes > limit_ - held) {
      std::int64_t none = 0;
      if (record) refused_.compare_exchange_strong(none, held + bytes);
      return false;
    }
  } while (!held_.compare_exchange_weak(held, held + bytes));
  return true;
}

arrow::Status LimitedPool::Allocate(std::int64_t size, std::int64_t alignment, std::uint8_t** out) {
  if (size < 0) return arrow::Status::Invalid("negative allocation size");
  if (!take(size)) {
    return arrow::Status::OutOfMemory("an allocation of ", size, " bytes passes the limit of ", limit_, " (",
                                      held_.load(), " held)");
  }
  arrow::Status st = wrapped_->Allocate(size, alignment, out);
  if (!st.ok()) held_ -= size;
  return st;
}

arrow::Status LimitedPool::Reallocate(std::int64_t old_size, std::int64_t new_size, std::int64_t alignment,
                                      std::uint8_t** ptr) {
  if (new_size < 0) return arrow::Status::Invalid("negative allocation size");
  const std::int64_t more = new_size - old_size;
  if (more > 0 && !take(more)) {
    return arrow::Status::OutOfMemory("growing an allocation to ", new_size, " bytes passes the limit of ", limit_,
                                      " (", held_.load(), " held)");
  }
  arrow::Status st = wrapped_->Reallocate(old_size, new_size, alignment, ptr);
  if (!st.ok()) {
    if (more > 0) held_ -= more;
  } else if (more < 0) {
    held_ += more;
  }
  return st;
}

void LimitedPool::Free(std::uint8_t* buffer, std::int64_t size, std::int64_t alignment) {
  wrapped_->Free(buffer, size, alignment);
  held_ -= size;
}

}  // namespace mmfeed::dataset
