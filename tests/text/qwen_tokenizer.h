// The Qwen3 tokenizer of tests/data (its provenance in tests/data/README.md), loaded once for the
// text module's test binaries.
//
// Example:
//   qwen().encode("Hello, world").value();   // 9707, 11, 1879
#pragma once

#include <memory>

#include "text/tokenizer.h"

namespace mmfeed::text {

inline const Tokenizer& qwen() {
  static const std::unique_ptr<Tokenizer> tok =
      Tokenizer::from_file(MMFEED_TEST_DATA_DIR "/qwen3-tokenizer/tokenizer.json").value();
  return *tok;
}

}  // namespace mmfeed::text
