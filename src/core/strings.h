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

// `s` without leading and trailing spaces, tabs, CRs and LFs.
inline std::string trim(std::string_view s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const auto end = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(begin, end - begin + 1));
}

}  // namespace mmfeed::core
