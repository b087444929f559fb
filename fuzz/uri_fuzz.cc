// Fuzz target: URI parsing and percent-decoding. Invariant: a parsed URI's canonical spelling
// parses again to the same URI.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "storage/uri.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::storage;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)percent_decode(text);
  const auto uri = parse_uri(text, "/base");
  if (!uri.ok() || uri->scheme == Scheme::kFile) return 0;  // file paths normalise: not a fixpoint
  const auto again = parse_uri(uri->to_string(), "/base");
  if (!again.ok() || again->to_string() != uri->to_string()) std::abort();
  return 0;
}
