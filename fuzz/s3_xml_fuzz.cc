// Fuzz target: the S3 XML readers (ListObjectsV2 pages and error documents).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "storage/s3.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace mmfeed::storage;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  const auto page = parse_list_objects_v2(xml);
  if (page.ok() && page->truncated && page->next_continuation_token.empty()) std::abort();
  (void)parse_s3_error(xml);
  return 0;
}
