#include "storage/uri.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>

namespace mmfeed::storage {
namespace {

TEST(UriTest, S3BucketAndKey) {
  auto uri = parse_uri("s3://my-bucket/train/a b+c=d~e.jpg");
  ASSERT_TRUE(uri.ok()) << uri.error().to_string();
  EXPECT_EQ(uri->scheme, Scheme::kS3);
  EXPECT_EQ(uri->bucket, "my-bucket");
  EXPECT_EQ(uri->key, "train/a b+c=d~e.jpg");
  EXPECT_EQ(uri->to_string(), "s3://my-bucket/train/a b+c=d~e.jpg");
}

TEST(UriTest, S3BucketOnlyIsAPrefix) {
  auto uri = parse_uri("s3://bucket");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->key, "");
}

TEST(UriTest, RelativePathsResolveAgainstTheBase) {
  auto uri = parse_uri("images/../images/cat.jpg", "/data/set1");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->scheme, Scheme::kFile);
  EXPECT_EQ(uri->path, "/data/set1/images/cat.jpg");
  EXPECT_EQ(parse_uri("/abs/x.png", "/data")->path, "/abs/x.png");
}

TEST(UriTest, FileUrlsAreDecoded) {
  auto uri = parse_uri("file:///data/my%20cat.jpg");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->path, "/data/my cat.jpg");
  EXPECT_EQ(parse_uri("file://localhost/x")->path, "/x");
}

TEST(UriTest, HttpUrlsAreKeptAsGiven) {
  auto uri = parse_uri("https://example.com:8443/a/b.jpg?x=1");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->scheme, Scheme::kHttps);
  EXPECT_EQ(uri->url, "https://example.com:8443/a/b.jpg?x=1");
}

struct BadUri {
  const char* text;
  const char* message;
};

TEST(UriTest, MalformedUrisAreRejectedWithTheReason) {
  for (const BadUri& bad : {
           BadUri{"", "empty URI"},
           BadUri{"gs://bucket/key", "unsupported URI scheme 'gs'"},
           BadUri{"s3:///key", "S3 URI without a bucket"},
           BadUri{"s3://bad bucket/key", "invalid character in bucket name"},
           BadUri{"http:///path", "URL without a host"},
           BadUri{"http://host/a b", "URL contains whitespace"},
           BadUri{"file://remote/x", "file URI names a remote host 'remote'"},
           BadUri{"file:///x%zz", "malformed percent-escape"},
           BadUri{"file:///x%4", "truncated percent-escape"},
       }) {
    auto uri = parse_uri(bad.text);
    ASSERT_FALSE(uri.ok()) << bad.text;
    EXPECT_EQ(uri.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(uri.error().to_string().find(bad.message), std::string::npos) << uri.error().to_string();
  }
}

// Issue 31: a JSON "\u0000" in a media reference cut it short where the operating system or
// libcurl read it ("ok.png\0.jpg" loaded ok.png; a URL lost the rest of its path).
TEST(UriTest, Issue31ANulByteIsRefusedWhereverItIs) {
  using namespace std::string_view_literals;
  for (const auto& [text, shown] :
       {std::pair{"ok.png\0.jpg"sv, "ok.png\\x00.jpg"}, std::pair{"http://h/a\0/b.jpg"sv, "http://h/a\\x00/b.jpg"},
        std::pair{"s3://b/k\0x"sv, "s3://b/k\\x00x"}, std::pair{"file:///x\0y"sv, "file:///x\\x00y"}}) {
    auto uri = parse_uri(text);
    ASSERT_FALSE(uri.ok()) << shown;
    EXPECT_EQ(uri.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(uri.error().to_string(), std::string(shown) + ": URI contains a NUL byte (at byte " +
                                           std::to_string(text.find('\0')) +
                                           "), which would cut it short; remove it from the manifest");
  }
}

TEST(UriTest, Issue31AControlCharacterInAUrlIsRefused) {
  auto uri = parse_uri(
      "https://h/a\x01"
      "b.jpg");
  ASSERT_FALSE(uri.ok());
  EXPECT_EQ(uri.error().to_string(),
            "https://h/a\\x01b.jpg: URL contains a control character (0x01 at byte 11); percent-encode it");
  EXPECT_FALSE(parse_uri("http://h/\x7f").ok());
}

TEST(UriTest, EncodingFollowsTheS3Rules) {
  EXPECT_EQ(uri_encode("a b+c=d~e_f-g.h/i", true), "a%20b%2Bc%3Dd~e_f-g.h/i");
  EXPECT_EQ(uri_encode("a/b", false), "a%2Fb");
  EXPECT_EQ(uri_encode("\xe1\x88\xb4", true), "%E1%88%B4");
  EXPECT_EQ(uri_encode("!*'()$&,;:@?#[]%", true), "%21%2A%27%28%29%24%26%2C%3B%3A%40%3F%23%5B%5D%25");
}

}  // namespace
}  // namespace mmfeed::storage
