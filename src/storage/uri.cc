#include "storage/uri.h"

#include <unistd.h>

#include <filesystem>

#include "core/strings.h"
#include "storage/redact.h"

namespace mmfeed::storage {

std::string_view scheme_name(Scheme scheme) {
  switch (scheme) {
    case Scheme::kFile: return "file";
    case Scheme::kHttp: return "http";
    case Scheme::kHttps: return "https";
    case Scheme::kS3: return "s3";
  }
  return "unknown";
}

std::string ObjectUri::to_string() const {
  switch (scheme) {
    case Scheme::kFile: return "file://" + path;
    case Scheme::kHttp:
    case Scheme::kHttps: return redact_uri(url);
    case Scheme::kS3: return redact_uri("s3://" + bucket + "/" + key);
  }
  return {};
}

std::string uri_encode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '_' || c == '.' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Result<std::string> percent_decode(std::string_view s) {
  constexpr auto hex = core::hex_value;
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) {
      return Error(ErrorCode::kInvalidArgument, "truncated percent-escape", std::string(s));
    }
    const int hi = hex(s[i + 1]);
    const int lo = hex(s[i + 2]);
    if (hi < 0 || lo < 0) return Error(ErrorCode::kInvalidArgument, "malformed percent-escape", std::string(s));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

namespace {

constexpr char kHex[] = "0123456789abcdef";

// `text` with control bytes written as \xNN: a NUL would end a message where it is printed.
std::string printable(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

Error bad_uri(std::string_view text, std::string message) {
  return Error(ErrorCode::kInvalidArgument, std::move(message), printable(redact_uri(text)));
}

// The first control byte (below 0x20, or DEL) of a URL, as "0x01 at byte 7".
std::string control_byte_at(std::string_view text, std::size_t at) {
  const auto c = static_cast<unsigned char>(text[at]);
  return std::string("0x") + kHex[c >> 4] + kHex[c & 15] + " at byte " + std::to_string(at);
}

Result<ObjectUri> parse_local(std::string_view text, std::string_view path, std::string_view base_dir) {
  if (path.empty()) return bad_uri(text, "empty file path");
  std::filesystem::path p{std::string(path)};
  if (p.is_relative()) {
    std::filesystem::path base =
        base_dir.empty() ? std::filesystem::current_path() : std::filesystem::path(std::string(base_dir));
    if (base.is_relative()) base = std::filesystem::current_path() / base;
    p = base / p;
  }
  ObjectUri uri;
  uri.scheme = Scheme::kFile;
  uri.path = p.lexically_normal().string();
  return uri;
}

}  // namespace

Result<ObjectUri> parse_uri(std::string_view text, std::string_view base_dir) {
  if (text.empty()) return bad_uri(text, "empty URI");
  if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return bad_uri(text, "URI contains a NUL byte (at byte " + std::to_string(nul) +
                             "), which would cut it short; remove it from the manifest");
  }
  const std::size_t colon = text.find("://");
  if (colon == std::string_view::npos) return parse_local(text, text, base_dir);

  const std::string_view scheme = text.substr(0, colon);
  const std::string_view rest = text.substr(colon + 3);
  if (scheme == "file") {
    // file:///abs/path or file://localhost/abs/path; the path is percent-decoded.
    const std::size_t slash = rest.find('/');
    const std::string_view host = rest.substr(0, slash);
    if (slash == std::string_view::npos) return bad_uri(text, "file URI without a path");
    if (!host.empty() && host != "localhost") {
      const std::string_view name = host.substr(host.rfind('@') + 1);  // never its user:password@
      return bad_uri(text, "file URI names a remote host '" + std::string(name) + "'");
    }
    MMFEED_ASSIGN_OR_RETURN(std::string path, percent_decode(rest.substr(slash)));
    return parse_local(text, path, base_dir);
  }
  if (scheme == "http" || scheme == "https") {
    const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    if (authority.empty()) return bad_uri(text, "URL without a host");
    if (text.find_first_of(" \t\r\n") != std::string_view::npos) {
      return bad_uri(text, "URL contains whitespace; percent-encode it");
    }
    for (std::size_t i = 0; i < text.size(); ++i) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c < 0x20 || c == 0x7f) {
        return bad_uri(text, "URL contains a control character (" + control_byte_at(text, i) + "); percent-encode it");
      }
    }
    ObjectUri uri;
    uri.scheme = scheme == "http" ? Scheme::kHttp : Scheme::kHttps;
    uri.url = std::string(text);
    return uri;
  }
  if (scheme == "s3") {
    const std::size_t slash = rest.find('/');
    ObjectUri uri;
    uri.scheme = Scheme::kS3;
    uri.bucket = std::string(rest.substr(0, slash));
    if (slash != std::string_view::npos) uri.key = std::string(rest.substr(slash + 1));
    if (uri.bucket.empty()) return bad_uri(text, "S3 URI without a bucket");
    for (const char c : uri.bucket) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                      (c >= 'A' && c <= 'Z');
      if (!ok) return bad_uri(text, "invalid character in bucket name ('" + printable(std::string_view(&c, 1)) + "')");
    }
    return uri;
  }
  return bad_uri(
      text, "unsupported URI scheme '" + std::string(scheme) + "' (supported: file, http, https, s3, or a plain path)");
}

}  // namespace mmfeed::storage
