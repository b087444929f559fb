#include "storage/redact.h"

#include <algorithm>
#include <array>

#include "core/strings.h"

namespace mmfeed::storage {

namespace {

// `s` with its %XX escapes decoded; a malformed escape stays as it is (a name is only matched).
std::string decode_leniently(std::string_view s) {
  constexpr auto hex = core::hex_value;
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// "a=1&sig=x&b" with the values of credential parameters replaced; pieces without '=' stay, and
// so does a value redacted before: text that quotes a redacted URL ("<manifest>?sig=REDACTED:17",
// a sample id) keeps what follows it.
std::string redact_parameters(std::string_view params) {
  std::string out;
  out.reserve(params.size());
  std::size_t at = 0;
  while (true) {
    const std::size_t amp = params.find('&', at);
    const std::string_view piece = params.substr(at, amp == std::string_view::npos ? std::string_view::npos : amp - at);
    const std::size_t eq = piece.find('=');
    if (eq != std::string_view::npos && !piece.substr(eq + 1).starts_with(kRedacted) &&
        is_credential_parameter(piece.substr(0, eq))) {
      out.append(piece.substr(0, eq + 1));
      out.append(kRedacted);
    } else {
      out.append(piece);
    }
    if (amp == std::string_view::npos) break;
    out += '&';
    at = amp + 1;
  }
  return out;
}

bool is_scheme_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
}

// Where a URL quoted in free text ends: whitespace, a quote, an angle bracket or a control byte.
bool ends_url(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7f || c == '"' || c == '\'' || c == '`' || c == '<' || c == '>';
}

// Punctuation that ends a sentence or a "URL: message" rather than the URL.
bool is_trailing_punctuation(char c) {
  return c == '.' || c == ',' || c == ';' || c == ':' || c == '!' || c == '?' || c == ')' || c == ']' || c == '}';
}

}  // namespace

bool is_credential_parameter(std::string_view name) {
  static constexpr std::array<std::string_view, 6> kExact{"sig", "key", "signature", "awsaccesskeyid", "pass", "pwd"};
  static constexpr std::array<std::string_view, 10> kContained{
      "token", "signature", "credential", "secret", "password", "passwd", "apikey", "api_key", "accesskey", "auth"};
  const std::string lower = core::ascii_lower(decode_leniently(name));
  for (std::string_view exact : kExact) {
    if (lower == exact) return true;
  }
  for (std::string_view part : kContained) {
    if (lower.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string redact_uri(std::string_view uri) {
  const std::size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return std::string(uri);
  const std::size_t authority = scheme_end + 3;
  const std::size_t authority_end = std::min(uri.find_first_of("/?#", authority), uri.size());
  const std::size_t query = std::min(uri.find('?', authority_end), uri.size());
  const std::size_t fragment = std::min(uri.find('#', authority_end), uri.size());
  const std::size_t path_end = std::min(query, fragment);

  std::string out(uri.substr(0, authority));
  const std::string_view host_part = uri.substr(authority, authority_end - authority);
  if (const std::size_t at = host_part.rfind('@'); at != std::string_view::npos) {
    out.append(kRedacted);
    out.append(host_part.substr(at));
  } else {
    out.append(host_part);
  }
  out.append(uri.substr(authority_end, path_end - authority_end));
  if (query < fragment) {
    out += '?';
    out += redact_parameters(uri.substr(query + 1, fragment - query - 1));
  }
  if (fragment < uri.size()) {
    out += '#';
    out += redact_parameters(uri.substr(fragment + 1));
  }
  return out;
}

std::string redact_uris_in(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;  // text[0, copied) is in out
  std::size_t search = 0;
  while (true) {
    const std::size_t sep = text.find("://", search);
    if (sep == std::string_view::npos) break;
    std::size_t begin = sep;
    while (begin > copied && is_scheme_char(text[begin - 1])) --begin;
    std::size_t end = sep + 3;
    while (end < text.size() && !ends_url(text[end])) ++end;
    while (end > sep + 3 && is_trailing_punctuation(text[end - 1])) --end;
    if (begin == sep) {  // no scheme before "://": not a URL
      search = sep + 3;
      continue;
    }
    out.append(text.substr(copied, begin - copied));
    out += redact_uri(text.substr(begin, end - begin));
    copied = end;
    search = std::max(end, sep + 3);
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace mmfeed::storage
