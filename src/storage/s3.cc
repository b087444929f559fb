#include "storage/s3.h"

#include <expat.h>

#include <cstdlib>
#include <functional>
#include <memory>

#include "storage/sigv4.h"
#include "storage/uri.h"

namespace mmfeed::storage {

namespace {

struct Endpoint {
  std::string scheme;     // "https"
  std::string authority;  // "host[:port]"
};

Endpoint endpoint_of(const S3Options& options) {
  if (options.endpoint.empty()) return {"https", "s3." + options.region + ".amazonaws.com"};
  std::string_view e = options.endpoint;
  Endpoint out{"https", ""};
  if (const auto p = e.find("://"); p != std::string_view::npos) {
    out.scheme = std::string(e.substr(0, p));
    e.remove_prefix(p + 3);
  }
  out.authority = std::string(e.substr(0, e.find('/')));
  return out;
}

bool dns_compatible(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (const char c : bucket) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return bucket.front() != '-' && bucket.back() != '-';
}

}  // namespace

std::string permission_hint(const S3Options& options) {
  std::string hint = " (check the credentials";
  if (!options.credentials.empty() && !options.anonymous) {
    hint += " [access key " + options.credentials.access_key_id + ", from " + options.credentials.source + "]";
  } else {
    hint += " [none: the request was unsigned]";
  }
  return hint + ", the region [" + options.region + "] and the endpoint [" +
         (options.endpoint.empty() ? std::string("AWS") : options.endpoint) + "])";
}

bool uses_path_style(const S3Options& options, std::string_view bucket) {
  switch (options.addressing) {
    case Addressing::kPath: return true;
    case Addressing::kVirtual: return false;
    case Addressing::kAuto: return !options.endpoint.empty() || !dns_compatible(bucket);
  }
  return true;
}

HttpRequest s3_request(const S3Options& options, std::string_view method, std::string_view bucket, std::string_view key,
                       const HeaderList& query, const HeaderList& extra_headers) {
  const Endpoint endpoint = endpoint_of(options);
  SigningRequest sreq;
  sreq.method = std::string(method);
  if (uses_path_style(options, bucket)) {
    sreq.host = endpoint.authority;
    sreq.path = "/" + std::string(bucket) + "/" + std::string(key);
  } else {
    sreq.host = std::string(bucket) + "." + endpoint.authority;
    sreq.path = "/" + std::string(key);
  }
  sreq.query = query;
  sreq.headers = extra_headers;

  HttpRequest out;
  out.url = endpoint.scheme + "://" + sreq.host + uri_encode(sreq.path, true);
  const std::string q = canonical_query(query);
  if (!q.empty()) out.url += "?" + q;
  if (options.anonymous || options.credentials.empty()) {
    out.headers.emplace_back("host", sreq.host);
    for (const auto& h : extra_headers) out.headers.push_back(h);
    return out;
  }
  out.headers = sign_v4(sreq, options.credentials, options.region, "s3", amz_date_now()).headers;
  return out;
}

namespace {

// A small expat-driven collector: records the text of elements at given paths.
class XmlWalker {
 public:
  using OnEnd = std::function<void(const std::string& path, std::string&& text)>;

  explicit XmlWalker(OnEnd on_end) : on_end_(std::move(on_end)) {}

  Status parse(std::string_view xml) {
    std::unique_ptr<XML_ParserStruct, decltype(&XML_ParserFree)> parser(XML_ParserCreate("UTF-8"), &XML_ParserFree);
    XML_SetUserData(parser.get(), this);
    XML_SetElementHandler(parser.get(), &XmlWalker::start, &XmlWalker::end);
    XML_SetCharacterDataHandler(parser.get(), &XmlWalker::text);
    if (XML_Parse(parser.get(), xml.data(), static_cast<int>(xml.size()), XML_TRUE) == XML_STATUS_ERROR) {
      return Error(ErrorCode::kCorruptData, std::string("malformed XML: ") +
                                                XML_ErrorString(XML_GetErrorCode(parser.get())) + " at line " +
                                                std::to_string(XML_GetCurrentLineNumber(parser.get())));
    }
    return ok_status();
  }

 private:
  static void start(void* self, const XML_Char* name, const XML_Char**) {
    auto* w = static_cast<XmlWalker*>(self);
    std::string_view n = name;
    if (const auto sep = n.rfind('|'); sep != std::string_view::npos) n.remove_prefix(sep + 1);
    w->path_ += "/";
    w->path_ += n;
    w->text_.clear();
  }
  static void end(void* self, const XML_Char*) {
    auto* w = static_cast<XmlWalker*>(self);
    w->on_end_(w->path_, std::move(w->text_));
    w->text_.clear();
    w->path_.resize(w->path_.rfind('/'));
  }
  static void text(void* self, const XML_Char* s, int len) {
    static_cast<XmlWalker*>(self)->text_.append(s, static_cast<std::size_t>(len));
  }

  OnEnd on_end_;
  std::string path_;
  std::string text_;
};

}  // namespace

Result<ListPage> parse_list_objects_v2(std::string_view xml) {
  ListPage page;
  S3Object pending;  // children end before their <Contents>, so fields gather here first
  bool saw_root = false;
  std::string bad_size;
  XmlWalker walker([&](const std::string& path, std::string&& text) {
    if (path == "/ListBucketResult") {
      saw_root = true;
    } else if (path == "/ListBucketResult/Contents") {
      page.objects.push_back(std::move(pending));
      pending = S3Object();
    } else if (path == "/ListBucketResult/Contents/Key") {
      pending.key = std::move(text);
    } else if (path == "/ListBucketResult/Contents/Size") {
      char* end = nullptr;
      pending.size = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0') bad_size = text;
    } else if (path == "/ListBucketResult/Contents/ETag") {
      pending.etag = std::move(text);
    } else if (path == "/ListBucketResult/Contents/LastModified") {
      pending.last_modified = std::move(text);
    } else if (path == "/ListBucketResult/IsTruncated") {
      page.truncated = text == "true";
    } else if (path == "/ListBucketResult/NextContinuationToken") {
      page.next_continuation_token = std::move(text);
    } else if (path == "/ListBucketResult/CommonPrefixes/Prefix") {
      page.common_prefixes.push_back(std::move(text));
    }
  });
  MMFEED_RETURN_IF_ERROR(walker.parse(xml));
  if (!saw_root) return Error(ErrorCode::kCorruptData, "not a ListBucketResult document");
  if (!bad_size.empty()) return Error(ErrorCode::kCorruptData, "object size '" + bad_size + "' is not a number");
  if (page.truncated && page.next_continuation_token.empty()) {
    return Error(ErrorCode::kCorruptData, "truncated listing without NextContinuationToken");
  }
  return page;
}

std::optional<S3ErrorDocument> parse_s3_error(std::string_view xml) {
  S3ErrorDocument doc;
  bool saw_root = false;
  XmlWalker walker([&](const std::string& path, std::string&& text) {
    if (path == "/Error") saw_root = true;
    if (path == "/Error/Code") doc.code = std::move(text);
    if (path == "/Error/Message") doc.message = std::move(text);
  });
  if (!walker.parse(xml).ok() || !saw_root || doc.code.empty()) return std::nullopt;
  return doc;
}

}  // namespace mmfeed::storage
