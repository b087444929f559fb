#include "nginx_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace mmfeed::storage::testing {

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// `name` on $PATH, else in /usr/sbin or /usr/bin (a PATH without sbin still finds nginx); empty
// when it is nowhere.
std::string find_program(const std::string& name) {
  std::string dirs = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  dirs += ":/usr/sbin:/usr/bin";
  std::stringstream in(dirs);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

// Starts `program args...` with stdin and stdout on /dev/null and stderr into `stderr_file`.
// posix_spawn, not fork: the test process may hold threads (a fetcher's abandoned readers).
Result<pid_t> spawn(const std::string& program, const std::vector<std::string>& args, const fs::path& stderr_file) {
  std::vector<std::string> all{program};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Error(ErrorCode::kIoError, "cannot start " + program + ": " + std::strerror(rc));
  return pid;
}

// Waits for `pid`'s exit; its exit status, or -1 when killed by a signal.
int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `n` distinct ports that were free: every socket stays bound until all are chosen, so the kernel
// cannot hand the same port out twice (the plain and the TLS server on one port make nginx refuse
// its config: "no ssl_certificate is defined for the listen ... ssl directive").
std::vector<int> free_ports(int n) {
  std::vector<int> fds;
  std::vector<int> ports;
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (const int fd : fds) ::close(fd);
  return ports;
}

bool accepts_connections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

void replace_all(std::string& text, std::string_view key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) {
    text.replace(at, key.size(), value);
  }
}

// Starts nginx on `workdir`/nginx.conf and waits (30 s at most) until it accepts on `port`.
Result<pid_t> launch(const std::string& nginx, const fs::path& workdir, int port) {
  auto pid = spawn(nginx, {"-c", (workdir / "nginx.conf").string(), "-p", workdir.string()}, workdir / "stderr.log");
  if (!pid.ok()) return pid.error();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!accepts_connections(port)) {
    int status = 0;
    if (::waitpid(*pid, &status, WNOHANG) == *pid) {
      return Error(ErrorCode::kIoError, "nginx exited before listening: " + read_text(workdir / "stderr.log") +
                                            read_text(workdir / "error.log"));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(*pid, SIGKILL);
      wait_exit(*pid);
      return Error(ErrorCode::kIoError, "nginx did not listen on port " + std::to_string(port) +
                                            " within 30 s: " + read_text(workdir / "error.log"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return *pid;
}

}  // namespace

Result<std::unique_ptr<NginxServer>> NginxServer::start(const fs::path& root, const fs::path& workdir) {
  const std::string nginx = find_program("nginx");
  if (nginx.empty()) {
    return Error(ErrorCode::kNotFound,
                 "nginx is not installed (not on PATH, nor in /usr/sbin): the HTTP fetch tests need it with its Lua "
                 "module; scripts/setup.sh installs both");
  }
  const std::string openssl = find_program("openssl");
  if (openssl.empty()) {
    return Error(
        ErrorCode::kNotFound,
        "openssl is not installed: the HTTP fetch tests make nginx's TLS certificate with it; scripts/setup.sh "
        "installs it");
  }
  fs::create_directories(workdir);

  // The certificate of the config's TLS server, made as objectstore.py makes it.
  auto req = spawn(openssl,
                   {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                    "subjectAltName=IP:127.0.0.1", "-keyout", (workdir / "key.pem").string(), "-out",
                    (workdir / "cert.pem").string()},
                   workdir / "openssl.log");
  if (!req.ok()) return req.error();
  if (wait_exit(*req) != 0) {
    return Error(ErrorCode::kIoError,
                 "openssl could not make the test certificate: " + read_text(workdir / "openssl.log"));
  }

  const fs::path servers = MMFEED_TEST_SERVERS_DIR;
  const std::string conf_in = read_text(servers / "nginx.conf.in");
  if (conf_in.empty()) return Error(ErrorCode::kNotFound, "cannot read " + (servers / "nginx.conf.in").string());
  // A port chosen free may be taken by another process before nginx binds it: that start is
  // tried again on new ports, a few times.
  for (int attempt = 1;; ++attempt) {
    const std::vector<int> ports = free_ports(2);
    std::string conf = conf_in;
    replace_all(conf, "@PREFIX@", fs::absolute(workdir).string());
    replace_all(conf, "@PORT@", std::to_string(ports[0]));
    replace_all(conf, "@TLSPORT@", std::to_string(ports[1]));
    replace_all(conf, "@ROOT@", fs::absolute(root).string());
    replace_all(conf, "@USER@", ::geteuid() == 0 ? "user root root;" : "");
    replace_all(conf, "@SERVERS@", servers.string());
    std::ofstream(workdir / "nginx.conf") << conf;
    auto pid = launch(nginx, workdir, ports[0]);
    if (pid.ok()) {
      return std::unique_ptr<NginxServer>(
          new NginxServer(*pid, ports[0], ports[1], (fs::absolute(workdir) / "cert.pem").string()));
    }
    if (attempt == 3 || pid.error().message().find("Address already in use") == std::string::npos) {
      return pid.error();
    }
  }
}

NginxServer::~NginxServer() {
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      wait_exit(pid_);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string NginxServer::url(std::string_view location, std::string_view name) const {
  return endpoint() + "/" + std::string(location) + "/" + std::string(name);
}

std::string NginxServer::tls_url(std::string_view location, std::string_view name) const {
  return "https://127.0.0.1:" + std::to_string(tls_port_) + "/" + std::string(location) + "/" + std::string(name);
}

std::string NginxServer::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

}  // namespace mmfeed::storage::testing
