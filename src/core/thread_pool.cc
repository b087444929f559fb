#include "core/thread_pool.h"

#include <pthread.h>

#include <stdexcept>

#include "core/clock.h"

namespace mmfeed::core {

void set_current_thread_name(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

ThreadPool::ThreadPool(std::string name, std::size_t threads, std::size_t queue_capacity)
    : name_(std::move(name)), tasks_(queue_capacity) {
  if (threads == 0) throw std::invalid_argument("thread pool '" + name_ + "' needs at least one thread");
  try {
    workers_.reserve(threads);
    for (std::size_t i = 0; i < threads; ++i) {
      workers_.emplace_back([this, i] { worker_loop(i); });
    }
  } catch (...) {  // the system refused a thread: stop those started, then report it
    tasks_.close();
    for (auto& worker : workers_) worker.join();
    throw;
  }
}

ThreadPool::~ThreadPool() { shutdown(); }

bool ThreadPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(idle_mu_);
    ++pending_;
  }
  if (tasks_.push(std::move(task))) return true;
  std::lock_guard lock(idle_mu_);
  if (--pending_ == 0) idle_cv_.notify_all();
  return false;
}

bool ThreadPool::submit_first(std::function<void()> task) {
  {
    std::lock_guard lock(idle_mu_);
    ++pending_;
  }
  if (tasks_.push_front(std::move(task))) return true;
  std::lock_guard lock(idle_mu_);
  if (--pending_ == 0) idle_cv_.notify_all();
  return false;
}

void ThreadPool::wait_idle() {
  std::unique_lock lock(idle_mu_);
  idle_cv_.wait(lock, [&] { return pending_ == 0; });
}

void ThreadPool::shutdown() {
  std::call_once(shutdown_once_, [&] {
    tasks_.close();
    for (auto& worker : workers_) worker.join();
  });
}

ThreadPoolStats ThreadPool::stats() const {
  ThreadPoolStats s;
  s.tasks_run = tasks_run_.load(std::memory_order_relaxed);
  s.busy_ns = busy_ns_.load(std::memory_order_relaxed);
  s.queue = tasks_.stats();
  return s;
}

void ThreadPool::worker_loop(std::size_t index) {
  set_current_thread_name(name_ + "-" + std::to_string(index));
  while (auto task = tasks_.pop()) {
    const std::int64_t start = now_ns();
    (*task)();
    busy_ns_.fetch_add(now_ns() - start, std::memory_order_relaxed);
    tasks_run_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(idle_mu_);
    if (--pending_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace mmfeed::core
