// What this build of mmfeed is and which native libraries it runs on.
//
// Example:
//   for (const auto& lib : mmfeed::linked_libraries())
//     std::cout << lib.name << " " << lib.version << " " << lib.detail << "\n";
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mmfeed {

std::string_view version();

struct LibraryInfo {
  std::string name;     // "libcurl"
  std::string version;  // "7.88.1", as the library reports it at run time
  std::string detail;   // what the build uses it with: TLS backend, SIMD targets, JIT...
};

// Every third-party library linked into the engine, queried at run time.
std::vector<LibraryInfo> linked_libraries();

}  // namespace mmfeed
