// The few string helpers the modules share (header values, INI lines, canonical requests), written
// once.
//
// Example:
//   ascii_lower("Content-Length")   // "content-length"
//   trim("  v1 \r\n")               // "v1"
#pragma once

#include <string>
#include <string_view>

namespace mmfeed::core {

// `s` with ASCII letters in lower case; other bytes (UTF-8 included) unchanged.
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// The value of hexadecimal digit `c` (0-9, a-f, A-F), or -1 for any other byte.
inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `s` without leading and trailing spaces, tabs, CRs and LFs.
inline std::string trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const auto end = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(begin, end - begin + 1));
}

}  // namespace mmfeed::core
