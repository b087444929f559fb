#include "storage/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>

#include "core/clock.h"
#include "core/owned_fd.h"
#include "core/thread_pool.h"
#include "storage/response.h"

namespace mmfeed::storage {

namespace {

// What a non-regular file is, for the message that refuses it.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

Error errno_error(int err, const std::string& what, const std::string& uri) {
  const ErrorCode code = err == ENOENT || err == ENOTDIR ? ErrorCode::kNotFound
                         : err == EACCES || err == EPERM ? ErrorCode::kPermissionDenied
                                                         : ErrorCode::kIoError;
  return Error(code, what + ": " + std::strerror(err), uri);
}

}  // namespace

Result<core::Buffer> read_file(const FileRead& read, core::BufferPool& pool) {
  const core::OwnedFd file(::open(read.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (file.fd < 0) return errno_error(errno, "cannot open", read.uri);
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return errno_error(errno, "cannot stat", read.uri);
  if (!S_ISREG(st.st_mode)) {
    return Error(ErrorCode::kUnsupported, std::string("cannot read: ") + file_kind(st.st_mode) + ", not a regular file",
                 read.uri);
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t offset = std::min(read.offset, size);
  const std::uint64_t length = std::min(read.length, size - offset);
  if (length > read.max_bytes) {
    return Error(ErrorCode::kResourceExhausted,
                 "file of " + std::to_string(length) + " bytes" + (length == size ? "" : " (in the range asked)") +
                     " exceeds the object size limit of " + std::to_string(read.max_bytes) + " bytes " +
                     raise_hint(read.max_bytes_option),
                 read.uri);
  }
  core::Buffer buf;
  try {
    buf = pool.acquire(static_cast<std::size_t>(length));
  } catch (const std::bad_alloc&) {
    return Error(ErrorCode::kResourceExhausted, "out of memory for a file of " + std::to_string(length) + " bytes",
                 read.uri);
  }
  std::uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(file.fd, buf.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error(errno, "read failed", read.uri);
    if (n == 0) {
      return Error(
          ErrorCode::kIoError,
          "file shrank while reading: got " + std::to_string(done) + " of " + std::to_string(length) + " bytes",
          read.uri);
    }
    done += static_cast<std::uint64_t>(n);
  }
  return buf;
}

struct FileReader::State {
  struct Pending {
    FileRead read;
    std::int64_t deadline_ns;
    int timeout_ms;
  };

  // Runs reads until the FileReader closes. `busy[index]` says whether this reader is inside a
  // read, which the destructor needs to know whether it can join it.
  static void run(const std::shared_ptr<State>& self, std::size_t index) {
    core::set_current_thread_name("file-read-" + std::to_string(index));
    std::unique_lock lock(self->mu);
    while (true) {
      self->work.wait(lock, [&] { return self->closed || !self->queue.empty(); });
      if (self->closed) return;
      Pending pending = std::move(self->queue.front());
      self->queue.pop_front();
      const std::uint64_t id = pending.read.id;
      self->busy[index] = true;
      self->running.emplace(id, pending);
      lock.unlock();
      Result<core::Buffer> data = self->read(pending.read, self->pool);
      lock.lock();
      self->busy[index] = false;
      if (self->closed) return;
      // Gone from `running`: its deadline passed or it was abandoned; the caller moved on.
      if (self->running.erase(id) == 0) continue;
      self->done.emplace_back(id, std::move(data));
      self->wake();
    }
  }

  std::mutex mu;
  std::condition_variable work;
  // All below guarded by mu. `pool`, `read` are set at construction and only used after.
  std::deque<Pending> queue;
  std::map<std::uint64_t, Pending> running;
  std::vector<std::pair<std::uint64_t, Result<core::Buffer>>> done;
  std::vector<bool> busy;
  bool closed = false;
  std::function<void()> wake;
  core::BufferPool pool;
  ReadFunction read;
};

FileReader::FileReader(std::size_t threads, core::BufferPool pool, std::function<void()> wake, ReadFunction read)
    : state_(std::make_shared<State>()) {
  state_->pool = std::move(pool);
  state_->wake = std::move(wake);
  state_->read = std::move(read);
  threads = std::max<std::size_t>(1, threads);
  state_->busy.assign(threads, false);
  for (std::size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([state = state_, i] { State::run(state, i); });
  }
}

FileReader::~FileReader() {
  std::vector<bool> busy;
  {
    std::lock_guard lock(state_->mu);
    state_->closed = true;
    state_->wake = nullptr;
    state_->queue.clear();
    busy = state_->busy;
  }
  state_->work.notify_all();
  // A reader idle now stays idle (closed, nothing queued) and returns at once; a busy one may be
  // stuck in the kernel for good, so it is left to finish on its own.
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    if (busy[i]) {
      threads_[i].detach();
    } else {
      threads_[i].join();
    }
  }
}

void FileReader::submit(FileRead read, int timeout_ms) {
  const std::int64_t deadline = core::now_ns() + static_cast<std::int64_t>(timeout_ms) * 1'000'000;
  {
    std::lock_guard lock(state_->mu);
    state_->queue.push_back({std::move(read), deadline, timeout_ms});
  }
  state_->work.notify_one();
}

std::vector<std::pair<std::uint64_t, Result<core::Buffer>>> FileReader::take_done() {
  const std::int64_t now = core::now_ns();
  std::vector<std::pair<std::uint64_t, Result<core::Buffer>>> out;
  std::lock_guard lock(state_->mu);
  out.swap(state_->done);
  const auto expired = [now](const State::Pending& p) { return p.deadline_ns <= now; };
  for (auto it = state_->queue.begin(); it != state_->queue.end();) {
    if (!expired(*it)) {
      ++it;
      continue;
    }
    out.emplace_back(it->read.id,
                     Error(ErrorCode::kTimeout,
                           "local read not started within the attempt deadline of " + std::to_string(it->timeout_ms) +
                               " ms: every reader is busy (reads before it are stuck)",
                           it->read.uri));
    it = state_->queue.erase(it);
  }
  for (auto it = state_->running.begin(); it != state_->running.end();) {
    if (!expired(it->second)) {
      ++it;
      continue;
    }
    out.emplace_back(it->first,
                     Error(ErrorCode::kTimeout,
                           "local read still running at the attempt deadline of " +
                               std::to_string(it->second.timeout_ms) + " ms; abandoned (a stalled file system?)",
                           it->second.read.uri));
    it = state_->running.erase(it);
  }
  return out;
}

void FileReader::abandon(std::uint64_t id) {
  std::lock_guard lock(state_->mu);
  std::erase_if(state_->queue, [id](const State::Pending& p) { return p.read.id == id; });
  state_->running.erase(id);
  std::erase_if(state_->done, [id](const auto& d) { return d.first == id; });
}

}  // namespace mmfeed::storage
