// nginx for the C++ HTTP fetch tests: the server the Python tests and the benchmark start
// (tests/support/objectstore.py), from the same config (tests/support/servers/nginx.conf.in, with
// its /ok/, /faulty/?faults=..., /status/N/, /stall/ ... routes), on free loopback ports. Missing
// nginx or openssl is an error that says so: the tests that need the server fail, never skip.
//
// Example:
//   auto server = NginxServer::start(objects_dir, work_dir);
//   if (!server.ok()) FAIL() << server.error().to_string();
//   std::string url = (*server)->url("faulty", "a.bin") + "?faults=slowdown";
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "mmfeed/error.h"

namespace mmfeed::storage::testing {

class NginxServer {
 public:
  // Starts nginx serving the files of `root`, with its filled-in config, logs and a self-signed
  // certificate (for the config's TLS server) under `workdir`; returns once it accepts connections.
  // kNotFound when nginx or openssl is not installed, kIoError when nginx exits or does not listen
  // within 30 s (its error log attached).
  static Result<std::unique_ptr<NginxServer>> start(const std::filesystem::path& root,
                                                    const std::filesystem::path& workdir);
  ~NginxServer();  // stops nginx: TERM, then KILL after 10 s
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  // "http://127.0.0.1:<port>/<location>/<name>"
  std::string url(std::string_view location, std::string_view name) const;
  // "https://127.0.0.1:<tls port>/<location>/<name>": the config's TLS server, whose certificate
  // ca_file() holds.
  std::string tls_url(std::string_view location, std::string_view name) const;
  std::string ca_file() const { return ca_file_; }
  // "http://127.0.0.1:<port>": the server as a path-style S3 endpoint (its /listing-*/ buckets).
  std::string endpoint() const;

 private:
  NginxServer(pid_t pid, int port, int tls_port, std::string ca_file)
      : pid_(pid), port_(port), tls_port_(tls_port), ca_file_(std::move(ca_file)) {}

  pid_t pid_;
  int port_;
  int tls_port_;
  std::string ca_file_;
};

}  // namespace mmfeed::storage::testing
