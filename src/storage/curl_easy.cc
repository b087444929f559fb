#include "storage/curl_easy.h"

#include "core/strings.h"
#include "storage/credentials.h"

namespace mmfeed::storage {

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string resolve_ca_file(const FetchOptions& options) {
  return options.ca_file.empty() ? process_env("AWS_CA_BUNDLE").value_or("") : options.ca_file;
}

CurlShare::CurlShare() {
  init_curl_once();
  share_ = curl_share_init();
  curl_share_setopt(share_, CURLSHOPT_LOCKFUNC, &CurlShare::lock);
  curl_share_setopt(share_, CURLSHOPT_UNLOCKFUNC, &CurlShare::unlock);
  curl_share_setopt(share_, CURLSHOPT_USERDATA, this);
  curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(share_, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
}

CurlShare::~CurlShare() { curl_share_cleanup(share_); }

void CurlShare::lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
  static_cast<CurlShare*>(self)->locks_[static_cast<std::size_t>(data) % kLocks].lock();
}

void CurlShare::unlock(CURL*, curl_lock_data data, void* self) {
  static_cast<CurlShare*>(self)->locks_[static_cast<std::size_t>(data) % kLocks].unlock();
}

const char* redirect_protocols(std::string_view url) {
  return core::ascii_lower(url.substr(0, 8)) == "https://" ? "https" : kTransferProtocols;
}

CURL* new_get_handle(const FetchOptions& options, const std::string& ca_file, CURLSH* share, const HttpRequest& request,
                     bool follow_redirects, const EasyHooks& hooks, curl_slist*& headers) {
  CURL* e = curl_easy_init();
  curl_easy_setopt(e, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(e, CURLOPT_PRIVATE, hooks.user);
  curl_easy_setopt(e, CURLOPT_SHARE, share);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);  // keys like "a/../b" are names, not paths
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(options.attempt_timeout_ms));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(options.low_speed_bytes_per_s));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.low_speed_time_s));
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
  if (!ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, ca_file.c_str());
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L << 10);  // fewer, larger reads per object
  curl_easy_setopt(e, CURLOPT_USERAGENT, "mmfeed/0.1");
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, hooks.errbuf);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, hooks.on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, hooks.user);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, hooks.on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, hooks.user);
  // A proxy's "200 Connection established" would pass for the answer's headers in on_header.
  curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, kTransferProtocols);
  if (follow_redirects) {
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, kMaxRedirects);
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, redirect_protocols(request.url));
  }
  for (const auto& [name, value] : request.headers) {
    headers = curl_slist_append(headers, (name + ": " + value).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  return e;
}

}  // namespace mmfeed::storage
