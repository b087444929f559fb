// libcurl set-up for the fetch engine: the process-wide initialisation, the share handle through
// which the engine's connections reuse DNS answers and TLS sessions, and one GET's easy handle with
// the engine's deadlines, TLS settings and callbacks. Nothing here runs a transfer; the engine's
// I/O thread (fetch_engine.h) adds the handles to its multi handle and owns them from then on.
//
// Example:
//   CurlShare share;
//   curl_slist* headers = nullptr;
//   CURL* e = new_get_handle(options, ca_file, share.get(), request,
//                            {.on_header = h, .on_body = b, .user = t, .errbuf = t->errbuf}, headers);
//   ... curl_multi_add_handle(multi, e) ...
//   curl_easy_cleanup(e);
//   curl_slist_free_all(headers);
#pragma once

#include <curl/curl.h>

#include <array>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

#include "storage/fetcher.h"
#include "storage/s3.h"

namespace mmfeed::storage {

// Redirects followed for an HTTP(S) URI (S3 GETs follow none); one more is a loop.
inline constexpr long kMaxRedirects = 5;

// The protocols a GET may use, as CURLOPT_PROTOCOLS_STR takes them. libcurl is built with many
// more (ftp, file, smb, ldap, ...); a manifest or a redirect must not reach any of them.
inline constexpr const char* kTransferProtocols = "http,https";

// The protocols a redirect from `url` may go to (CURLOPT_REDIR_PROTOCOLS_STR): http and https,
// but from an https URL only https -- a plain http hop would give up the encryption and the
// server's authentication the URL asked for, without a word.
// Example: redirect_protocols("https://h/a.jpg")  // "https"
const char* redirect_protocols(std::string_view url);

// libcurl's process-wide initialisation, done once before the first handle.
void init_curl_once();

// The CA bundle handles trust: FetchOptions::ca_file, else $AWS_CA_BUNDLE, else "" (the system's).
std::string resolve_ca_file(const FetchOptions& options);

// A curl share handle for DNS answers and TLS sessions. libcurl locks it from whichever thread runs
// a transfer, so each kind of shared data has its own mutex. Not movable: libcurl holds `this`.
class CurlShare {
 public:
  CurlShare();   // initialises libcurl first (init_curl_once)
  ~CurlShare();  // after every handle using it is cleaned up
  CurlShare(const CurlShare&) = delete;
  CurlShare& operator=(const CurlShare&) = delete;

  CURLSH* get() const { return share_; }

 private:
  static constexpr std::size_t kLocks = 8;
  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* self);
  static void unlock(CURL*, curl_lock_data data, void* self);

  std::array<std::mutex, kLocks> locks_;
  CURLSH* share_ = nullptr;
};

// What a GET handle calls back into: the header and body callbacks, given `user` as their last
// argument (also the handle's CURLOPT_PRIVATE), and libcurl's error buffer (CURL_ERROR_SIZE bytes).
struct EasyHooks {
  curl_write_callback on_header = nullptr;
  curl_write_callback on_body = nullptr;
  void* user = nullptr;
  char* errbuf = nullptr;
};

// A new easy handle for a GET of `request` (its URL and every header to send), with the options'
// connect, attempt and low-speed limits, TLS verification against `ca_file` (empty: the system's),
// HTTP/1.1, keep-alive, the share handle, only kTransferProtocols, and, when `follow_redirects`
// (HTTP(S) URIs; S3 GETs follow none), at most kMaxRedirects redirects followed, each only to
// redirect_protocols(request.url). `headers` receives the list the handle sends; free it with
// curl_slist_free_all after curl_easy_cleanup of the handle.
CURL* new_get_handle(const FetchOptions& options, const std::string& ca_file, CURLSH* share, const HttpRequest& request,
                     bool follow_redirects, const EasyHooks& hooks, curl_slist*& headers);

}  // namespace mmfeed::storage
