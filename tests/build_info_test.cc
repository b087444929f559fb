#include "mmfeed/build_info.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

namespace mmfeed {
namespace {

TEST(BuildInfoTest, ReportsEveryNativeDependencyWithAVersion) {
  std::set<std::string> names;
  for (const auto& lib : linked_libraries()) {
    EXPECT_FALSE(lib.version.empty()) << lib.name;
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(lib.version[0]))) << lib.name << " " << lib.version;
    names.insert(lib.name);
  }
  const std::set<std::string> expected = {"libcurl",  "OpenSSL", "libjpeg-turbo", "libspng", "libwebp",
                                          "simdjson", "PCRE2",   "utf8proc",      "Highway", "expat"};
  std::set<std::string> with_video = expected;
  with_video.insert("FFmpeg");
  EXPECT_EQ(names, MMFEED_VIDEO_BUILD ? with_video : expected);
}

TEST(BuildInfoTest, VersionIsSemantic) {
  const std::string v(version());
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
}

}  // namespace
}  // namespace mmfeed
