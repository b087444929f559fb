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

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

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

// A GoogleTest suite with one nginx for all its tests: started before the first over a fresh
// folder of objects (Suite::write_objects fills it; none by default), stopped after the last. A
// server that did not start fails every test of the suite with its reason. Suite names its folder
// (Suite::kName) so that suites of one binary never share one.
template <class Suite>
class NginxSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / (std::string(Suite::kName) + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "objects");
    Suite::write_objects(dir_ / "objects");
    auto server = NginxServer::start(dir_ / "objects", dir_ / "nginx");
    if (server.ok()) {
      server_ = std::move(server).value();
    } else {
      start_error_ = server.error().to_string();
    }
  }

  static void TearDownTestSuite() {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void SetUp() override {
    if (!server_) GTEST_FAIL() << "no nginx to test against: " << start_error_;
  }

  static void write_objects(const std::filesystem::path&) {}

  static inline std::filesystem::path dir_;
  static inline std::unique_ptr<NginxServer> server_;
  static inline std::string start_error_;
};

}  // namespace mmfeed::storage::testing
