// A bounded blocking multi-producer multi-consumer queue: the connection between two pipeline
// stages. Its capacity is the stage's memory bound; the time producers wait on a full queue
// and consumers wait on an empty one says which side is the bottleneck.
//
// Two ways to stop it:
//   close()  - no more pushes; consumers drain what is queued, then pop() returns nullopt.
//   cancel() - no more pushes or pops; everything still queued is handed back to the caller,
//              so nothing is dropped without being accounted for.
// Either wakes every blocked producer and consumer.
//
// Example:
//   BoundedQueue<Sample> q(64);
//   std::thread producer([&] { for (auto& s : samples) if (!q.push(std::move(s))) break; q.close(); });
//   while (auto s = q.pop()) consume(*s);
//   producer.join();
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/clock.h"

namespace mmfeed::core {

struct QueueStats {
  std::uint64_t pushed = 0;
  std::uint64_t popped = 0;
  std::size_t depth = 0;
  std::size_t max_depth = 0;
  std::uint64_t producer_waits = 0;   // pushes that found the queue full and blocked
  std::int64_t producer_wait_ns = 0;  // time pushes spent blocked on a full queue
  std::int64_t consumer_wait_ns = 0;  // time pops spent blocked on an empty queue
};

template <class T>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t capacity) : capacity_(capacity) {
    if (capacity == 0) throw std::invalid_argument("BoundedQueue capacity must be positive");
  }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Blocks while the queue is full. Returns false when the queue is closed or cancelled; the
  // item is then left untouched with the caller (it is moved from only on success).
  bool push(T&& item) {
    std::unique_lock lock(mu_);
    wait_not_full(lock, std::nullopt);
    return push_locked(lock, item);
  }

  // Like push(), but gives up after `timeout`; false on timeout, close or cancel.
  template <class Rep, class Period>
  bool push_for(T&& item, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock lock(mu_);
    wait_not_full(lock, std::chrono::steady_clock::now() + timeout);
    return push_locked(lock, item);
  }

  // Never blocks; false when full, closed or cancelled.
  bool try_push(T&& item) {
    std::unique_lock lock(mu_);
    return push_locked(lock, item);
  }

  // Queues `item` ahead of every other, at once: it never blocks and may exceed the capacity (the
  // caller bounds how many it puts first). False when closed or cancelled.
  bool push_front(T&& item) {
    std::unique_lock lock(mu_);
    if (closed_) return false;
    items_.push_front(std::move(item));
    ++stats_.pushed;
    if (items_.size() > stats_.max_depth) stats_.max_depth = items_.size();
    const bool wake = consumers_waiting_ > 0;
    lock.unlock();
    if (wake) not_empty_.notify_one();
    return true;
  }

  // Blocks while the queue is full and open; false once closed. For a single producer that
  // builds what it pushes: waiting before building holds one item fewer than building first and
  // blocking in push(). Counted in stats().producer_waits when it blocks.
  bool wait_for_room() {
    std::unique_lock lock(mu_);
    wait_not_full(lock, std::nullopt);
    return !closed_;
  }

  // Blocks while the queue is empty and open. nullopt once closed and drained, or cancelled.
  std::optional<T> pop() {
    std::unique_lock lock(mu_);
    wait_not_empty(lock, std::nullopt);
    return pop_locked(lock);
  }

  // Like pop(), but gives up after `timeout` (nullopt; check closed() to tell the cases apart).
  template <class Rep, class Period>
  std::optional<T> pop_for(std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock lock(mu_);
    wait_not_empty(lock, std::chrono::steady_clock::now() + timeout);
    return pop_locked(lock);
  }

  std::optional<T> try_pop() {
    std::unique_lock lock(mu_);
    return pop_locked(lock);
  }

  // Rejects further pushes; queued items remain poppable.
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  // Rejects further pushes and pops and returns every item still queued, oldest first.
  std::vector<T> cancel() {
    std::vector<T> left;
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      cancelled_ = true;
      left.reserve(items_.size());
      for (auto& item : items_) left.push_back(std::move(item));
      items_.clear();
    }
    not_full_.notify_all();
    not_empty_.notify_all();
    return left;
  }

  bool closed() const {
    std::lock_guard lock(mu_);
    return closed_;
  }
  bool cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return items_.size();
  }
  std::size_t capacity() const {
    std::lock_guard lock(mu_);
    return capacity_;
  }

  // A new capacity (at least 1); producers blocked on a full queue are woken when it grows.
  // Items already queued beyond a smaller capacity stay; pushes wait until they are taken.
  void set_capacity(std::size_t capacity) {
    if (capacity == 0) throw std::invalid_argument("BoundedQueue capacity must be positive");
    {
      std::lock_guard lock(mu_);
      capacity_ = capacity;
    }
    not_full_.notify_all();
  }

  QueueStats stats() const {
    std::lock_guard lock(mu_);
    QueueStats s = stats_;
    s.depth = items_.size();
    return s;
  }

 private:
  using Deadline = std::optional<std::chrono::steady_clock::time_point>;

  void wait_not_full(std::unique_lock<std::mutex>& lock, Deadline deadline) {
    if (closed_ || items_.size() < capacity_) return;
    const std::int64_t start = now_ns();
    auto ready = [&] { return closed_ || items_.size() < capacity_; };
    ++producers_waiting_;
    ++stats_.producer_waits;
    if (deadline) {
      not_full_.wait_until(lock, *deadline, ready);
    } else {
      not_full_.wait(lock, ready);
    }
    --producers_waiting_;
    stats_.producer_wait_ns += now_ns() - start;
  }

  void wait_not_empty(std::unique_lock<std::mutex>& lock, Deadline deadline) {
    if (closed_ || !items_.empty()) return;
    const std::int64_t start = now_ns();
    auto ready = [&] { return closed_ || !items_.empty(); };
    ++consumers_waiting_;
    if (deadline) {
      not_empty_.wait_until(lock, *deadline, ready);
    } else {
      not_empty_.wait(lock, ready);
    }
    --consumers_waiting_;
    stats_.consumer_wait_ns += now_ns() - start;
  }

  bool push_locked(std::unique_lock<std::mutex>& lock, T& item) {
    if (closed_ || items_.size() >= capacity_) return false;
    items_.push_back(std::move(item));
    ++stats_.pushed;
    if (items_.size() > stats_.max_depth) stats_.max_depth = items_.size();
    const bool wake = consumers_waiting_ > 0;  // skip the futex call when nobody sleeps
    lock.unlock();
    if (wake) not_empty_.notify_one();
    return true;
  }

  std::optional<T> pop_locked(std::unique_lock<std::mutex>& lock) {
    if (cancelled_ || items_.empty()) return std::nullopt;
    std::optional<T> item(std::move(items_.front()));
    items_.pop_front();
    ++stats_.popped;
    const bool wake = producers_waiting_ > 0;
    lock.unlock();
    if (wake) not_full_.notify_one();
    return item;
  }

  std::size_t capacity_;  // guarded by mu_
  mutable std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
  bool cancelled_ = false;
  std::size_t producers_waiting_ = 0;
  std::size_t consumers_waiting_ = 0;
  QueueStats stats_;
};

}  // namespace mmfeed::core
