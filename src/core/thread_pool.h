// A fixed-size pool of named worker threads fed by a bounded task queue.
//
// Sizes are explicit: the pipeline decides how many CPU workers and I/O threads it runs, and
// each thread carries the pool's name ("decode-3") so that top, perf and the trace show who
// is busy. submit() blocks when the task queue is full, which is the back-pressure a stage
// needs; shutdown() runs what was already queued, then joins.
//
// Tasks given to submit() must not throw (an escaping exception terminates, as for any
// std::thread); async() carries a task's result or exception through a std::future.
//
// Example:
//   ThreadPool pool("decode", 4);
//   auto width = pool.async([&] { return probe(bytes).width; });
//   pool.submit([&] { decode_into(batch, bytes); });
//   pool.wait_idle();
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/bounded_queue.h"

namespace mmfeed::core {

struct ThreadPoolStats {
  std::uint64_t tasks_run = 0;
  std::int64_t busy_ns = 0;  // summed over the workers
  QueueStats queue;
};

class ThreadPool {
 public:
  // `threads` workers named "<name>-<i>" (Linux keeps the first 15 bytes); the task queue
  // holds at most `queue_capacity` tasks not yet started.
  // Throws std::system_error, with no thread left running, when the system refuses a thread.
  ThreadPool(std::string name, std::size_t threads, std::size_t queue_capacity = 1024);
  ~ThreadPool();  // shutdown()
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues a task, blocking while the queue is full. False once shutdown has begun.
  bool submit(std::function<void()> task);
  // Queues `task` ahead of every queued one, without blocking (a stage that waits for its own
  // tasks puts them first, so they do not wait behind the queue); false after shutdown.
  bool submit_first(std::function<void()> task);

  // Queues a callable and returns a future for its result (or exception). After shutdown the
  // future holds a std::runtime_error.
  template <class F>
  auto async(F&& fn) -> std::future<std::invoke_result_t<std::decay_t<F>>> {
    using R = std::invoke_result_t<std::decay_t<F>>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    auto future = task->get_future();
    if (!submit([task] { (*task)(); })) {
      std::promise<R> rejected;
      rejected.set_exception(std::make_exception_ptr(std::runtime_error("thread pool '" + name_ + "' is shut down")));
      return rejected.get_future();
    }
    return future;
  }

  // Blocks until every task submitted so far has finished.
  void wait_idle();

  // Stops accepting tasks, runs those already queued, joins the workers. Idempotent.
  void shutdown();

  const std::string& name() const { return name_; }
  std::size_t size() const { return workers_.size(); }
  ThreadPoolStats stats() const;

 private:
  void worker_loop(std::size_t index);

  const std::string name_;
  BoundedQueue<std::function<void()>> tasks_;
  std::vector<std::thread> workers_;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  std::size_t pending_ = 0;  // submitted and not yet finished; guarded by idle_mu_
  std::atomic<std::uint64_t> tasks_run_{0};
  std::atomic<std::int64_t> busy_ns_{0};
  std::once_flag shutdown_once_;
};

// Names the calling thread (visible in top -H, gdb, perf). Truncated to 15 bytes.
void set_current_thread_name(const std::string& name);

}  // namespace mmfeed::core
