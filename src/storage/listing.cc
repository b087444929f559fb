#include "storage/listing.h"

#include <curl/curl.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "storage/curl_easy.h"
#include "storage/redact.h"

namespace mmfeed::storage {

namespace {

struct Response {
  long status = 0;
  std::string body;
  std::size_t max_bytes = 0;
  bool too_large = false;  // the body passed max_bytes: the transfer was stopped
};

std::size_t append_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* resp = static_cast<Response*>(user);
  if (resp->body.size() + size * n > resp->max_bytes) {
    resp->too_large = true;
    return 0;  // libcurl ends the transfer with CURLE_WRITE_ERROR
  }
  resp->body.append(data, size * n);
  return size * n;
}

Result<Response> get_once(const HttpRequest& req, const ListOptions& options) {
  CURL* e = curl_easy_init();
  if (e == nullptr) return Error(ErrorCode::kInternal, "curl_easy_init failed");
  curl_slist* headers = nullptr;
  for (const auto& [name, value] : req.headers) headers = curl_slist_append(headers, (name + ": " + value).c_str());
  Response resp;
  resp.max_bytes = options.max_page_bytes;
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, kTransferProtocols);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ms));
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &append_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
  const CURLcode rc = curl_easy_perform(e);
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &resp.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(e);
  if (resp.too_large) {
    return Error(ErrorCode::kResourceExhausted,
                 "ListObjectsV2: an answer of more than " + std::to_string(options.max_page_bytes) +
                     " bytes, the most one page may take (S3's pages are far smaller); stopped reading it");
  }
  if (rc != CURLE_OK) {
    const ErrorCode code = rc == CURLE_OPERATION_TIMEDOUT ? ErrorCode::kTimeout : ErrorCode::kIoError;
    return Error(code, redact_uris_in(errbuf[0] ? errbuf : curl_easy_strerror(rc)), redact_uri(req.url));
  }
  return resp;
}

}  // namespace

Result<std::vector<S3Object>> list_objects(const S3Options& s3, std::string_view bucket, std::string_view prefix,
                                           const ListOptions& options) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const std::string where = "s3://" + std::string(bucket) + "/" + std::string(prefix);
  std::vector<S3Object> objects;
  std::string token;
  std::set<std::string> tokens_seen;
  std::size_t pages = 0;
  std::mt19937_64 rng(std::random_device{}());
  while (true) {
    HeaderList query = {{"list-type", "2"}, {"max-keys", std::to_string(options.max_keys)}};
    if (!prefix.empty()) query.emplace_back("prefix", std::string(prefix));
    if (!token.empty()) query.emplace_back("continuation-token", token);

    std::optional<Error> last_error;
    std::optional<ListPage> page;
    for (int attempt = 1; attempt <= options.max_attempts && !page; ++attempt) {
      if (attempt > 1) {
        std::uniform_int_distribution<int> jitter(0, std::min(5000, 100 << (attempt - 2)));
        std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
      }
      auto resp = get_once(s3_request(s3, "GET", bucket, "", query), options);
      if (!resp.ok()) {
        if (!is_retryable(resp.error().code())) return std::move(resp).error().with_context(where);
        last_error = std::move(resp).error();
        continue;
      }
      if (resp->status == 200) {
        auto parsed = parse_list_objects_v2(resp->body);
        if (!parsed.ok()) return std::move(parsed).error().with_context(where);
        page = std::move(parsed).value();
        break;
      }
      std::string message = "ListObjectsV2: HTTP " + std::to_string(resp->status);
      if (auto doc = parse_s3_error(resp->body)) message += " " + doc->code + ": " + doc->message;
      if (resp->status == 503 || resp->status == 429 || resp->status >= 500) {
        last_error = Error(ErrorCode::kUnavailable, message, where);
        continue;
      }
      const ErrorCode code = resp->status == 404   ? ErrorCode::kNotFound
                             : resp->status == 403 ? ErrorCode::kPermissionDenied
                                                   : ErrorCode::kInvalidArgument;
      if (code == ErrorCode::kPermissionDenied) message += permission_hint(s3);
      return Error(code, message, where);
    }
    if (!page) {
      return Error(last_error->code(),
                   last_error->message() + " (after " + std::to_string(options.max_attempts) + " attempts)",
                   last_error->context());
    }
    ++pages;
    if (page->objects.size() > options.max_objects - objects.size()) {
      return Error(ErrorCode::kResourceExhausted,
                   "ListObjectsV2: more than " + std::to_string(options.max_objects) +
                       " objects, the most a listing keeps (--max-list-objects); list a narrower prefix or raise "
                       "the limit",
                   where);
    }
    for (auto& o : page->objects) objects.push_back(std::move(o));
    if (!page->truncated) break;
    if (pages >= options.max_pages) {
      return Error(ErrorCode::kResourceExhausted,
                   "ListObjectsV2: more than " + std::to_string(options.max_pages) +
                       " pages, the most a listing asks for (--max-list-pages), and the server says there are more "
                       "(" +
                       std::to_string(objects.size()) +
                       " objects so far); list a narrower prefix, use larger "
                       "pages (--list-page-size) or raise the limit",
                   where);
    }
    // A token handed out before would list the same pages again, for ever.
    if (!tokens_seen.insert(page->next_continuation_token).second) {
      return Error(ErrorCode::kCorruptData,
                   "ListObjectsV2: the server repeated the continuation token '" + page->next_continuation_token +
                       "' (page " + std::to_string(tokens_seen.size() + 1) + "); listing stopped, it would never end",
                   where);
    }
    token = page->next_continuation_token;
  }
  return objects;
}

}  // namespace mmfeed::storage
