#include "storage/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <ctime>
#include <map>

#include "core/strings.h"
#include "storage/uri.h"

namespace mmfeed::storage {

std::string hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) {
    out += kHex[static_cast<unsigned char>(b) >> 4];
    out += kHex[static_cast<unsigned char>(b) & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  return hex(std::string_view(reinterpret_cast<const char*>(digest), len));
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), digest, &len);
  return std::string(reinterpret_cast<const char*>(digest), len);
}

std::string amz_date(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &utc);
  return buf;
}

std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) encoded.emplace_back(uri_encode(name, false), uri_encode(value, false));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

namespace {

// Trims a header value and folds every run of spaces (and line folds) to one space.
std::string canonical_header_value(std::string_view value) {
  std::string out;
  bool pending_space = false;
  for (const char c : value) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

}  // namespace

SignedRequest sign_v4(const SigningRequest& request, const Credentials& credentials, std::string_view region,
                      std::string_view service, std::string_view amz_date) {
  // Names lower-cased; repeated names join their values with ',' in the order given.
  std::map<std::string, std::string> headers;
  auto add = [&](std::string_view name, std::string_view value) {
    std::string& slot = headers[core::ascii_lower(name)];
    const std::string v = canonical_header_value(value);
    slot = slot.empty() ? v : slot + "," + v;
  };
  add("host", request.host);
  add("x-amz-date", amz_date);
  if (request.add_content_sha256_header) add("x-amz-content-sha256", request.payload_hash);
  if (!credentials.session_token.empty()) add("x-amz-security-token", credentials.session_token);
  for (const auto& [name, value] : request.headers) add(name, value);

  std::string canonical_headers;
  std::string signed_headers;
  for (const auto& [name, value] : headers) {
    canonical_headers += name + ":" + value + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += name;
  }

  SignedRequest out;
  out.canonical_request = request.method + "\n" + uri_encode(request.path.empty() ? "/" : request.path, true) + "\n" +
                          canonical_query(request.query) + "\n" + canonical_headers + "\n" + signed_headers + "\n" +
                          request.payload_hash;
  const std::string date(amz_date.substr(0, 8));
  const std::string scope = date + "/" + std::string(region) + "/" + std::string(service) + "/aws4_request";
  out.string_to_sign =
      "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + scope + "\n" + sha256_hex(out.canonical_request);

  const std::string k_date = hmac_sha256("AWS4" + credentials.secret_access_key, date);
  const std::string k_region = hmac_sha256(k_date, region);
  const std::string k_service = hmac_sha256(k_region, service);
  const std::string k_signing = hmac_sha256(k_service, "aws4_request");
  out.signature = hex(hmac_sha256(k_signing, out.string_to_sign));
  out.authorization = "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" + scope +
                      ", SignedHeaders=" + signed_headers + ", Signature=" + out.signature;

  for (const auto& [name, value] : headers) out.headers.emplace_back(name, value);
  out.headers.emplace_back("authorization", out.authorization);
  return out;
}

}  // namespace mmfeed::storage
