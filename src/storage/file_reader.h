// Local file reads for the fetch engine, on reader threads that a deadline can abandon.
//
// A read of a local path can block without end (a stalled network mount: open() or pread()
// sleeps in the kernel, which offers no way to interrupt it). So reads run on reader threads,
// and a read still running at its deadline is given to the caller as kTimeout and abandoned:
// whatever it returns later is dropped. The caller never waits for a read: destroying the
// FileReader joins the idle readers and detaches those stuck in a read. A detached reader
// touches only the state it shares with the FileReader through a shared_ptr (the queue, a
// BufferPool handle, the wake-up callback, which is dropped under the lock at destruction), so
// it may outlive the FileReader and whoever owned it.
//
// A stuck reader serves no other read; reads queued behind stuck ones meet their own deadline,
// which counts from submission, so none waits forever.
//
// Example:
//   FileReader reader(2, pool, [multi] { curl_multi_wakeup(multi); });
//   reader.submit({.id = 7, .path = "/data/a.jpg", .uri = "/data/a.jpg"}, /*timeout_ms=*/2000);
//   // ... once woken, or now and then to learn of expired deadlines:
//   for (auto& [id, data] : reader.take_done()) deliver(id, std::move(data));
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/buffer_pool.h"
#include "mmfeed/error.h"

namespace mmfeed::storage {

struct FileRead {
  std::uint64_t id = 0;  // the caller's handle, returned with the result
  std::string path;
  std::string uri;  // named in errors
  std::uint64_t offset = 0;
  std::uint64_t length = UINT64_MAX;                  // clipped at the end of the file
  std::uint64_t max_bytes = UINT64_MAX;               // more bytes to read than this: kResourceExhausted, nothing read
  std::string max_bytes_option = "max_object_bytes";  // the option that set max_bytes, named in the refusal
};

// Reads a regular file (or its range) into a buffer from `pool`. Anything else is refused by
// name before a byte is read ("a FIFO, not a regular file"): a FIFO would block until a writer
// came, a device may never end. Opens with O_NONBLOCK so that opening a FIFO cannot block.
// The length to read is checked against max_bytes before memory is taken, and a failed
// allocation is an error (kResourceExhausted), never an exception.
Result<core::Buffer> read_file(const FileRead& read, core::BufferPool& pool);

class FileReader {
 public:
  // How a read is done: read_file, or in tests a read that blocks on demand. Must not throw.
  using ReadFunction = std::function<Result<core::Buffer>(const FileRead&, core::BufferPool&)>;

  // `threads` readers (at least one) allocating from `pool`. `wake` is called, from a reader and
  // under the FileReader's lock, each time a result is ready; it must be cheap and must not
  // call back into the FileReader. It is never called once the destructor has begun.
  FileReader(std::size_t threads, core::BufferPool pool, std::function<void()> wake, ReadFunction read = read_file);
  ~FileReader();  // never waits for a read: idle readers are joined, busy ones detached
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  // Queues a read, due within timeout_ms of now (queueing included).
  void submit(FileRead read, int timeout_ms);

  // The reads finished since the last call, and as kTimeout each read whose deadline has
  // passed (queued or running; a running one is abandoned). Each submitted read is returned
  // exactly once, unless abandon()ed first.
  std::vector<std::pair<std::uint64_t, Result<core::Buffer>>> take_done();

  // Forgets a read: it is never returned, and its result is dropped if it ever comes.
  void abandon(std::uint64_t id);

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::vector<std::thread> threads_;
};

}  // namespace mmfeed::storage
