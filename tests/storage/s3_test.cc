#include "storage/s3.h"

#include <gtest/gtest.h>

namespace mmfeed::storage {
namespace {

S3Options aws(std::string region = "us-east-1") {
  S3Options o;
  o.region = std::move(region);
  o.credentials = {"AKID", "SECRET", "", "test"};
  return o;
}

std::string header(const HttpRequest& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<missing>";
}

TEST(S3RequestTest, VirtualHostedOnAws) {
  HttpRequest r = s3_request(aws("eu-west-1"), "GET", "my-bucket", "dir/a b+c.jpg");
  EXPECT_EQ(r.url, "https://my-bucket.s3.eu-west-1.amazonaws.com/dir/a%20b%2Bc.jpg");
  EXPECT_EQ(header(r, "host"), "my-bucket.s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(header(r, "x-amz-content-sha256"), "UNSIGNED-PAYLOAD");
  EXPECT_EQ(header(r, "authorization").rfind("AWS4-HMAC-SHA256 Credential=AKID/", 0), 0u);
}

TEST(S3RequestTest, PathStyleForCustomEndpointsAndDottedBuckets) {
  S3Options o = aws();
  o.endpoint = "http://127.0.0.1:9000";
  HttpRequest r = s3_request(o, "GET", "bucket", "k", {{"list-type", "2"}, {"prefix", "a/b"}});
  EXPECT_EQ(r.url, "http://127.0.0.1:9000/bucket/k?list-type=2&prefix=a%2Fb");
  EXPECT_EQ(header(r, "host"), "127.0.0.1:9000");
  EXPECT_TRUE(uses_path_style(aws(), "my.dotted.bucket"));
  o.addressing = Addressing::kVirtual;
  EXPECT_EQ(s3_request(o, "GET", "bucket", "k").url, "http://bucket.127.0.0.1:9000/k");
}

TEST(S3RequestTest, AnonymousRequestsAreUnsigned) {
  S3Options o = aws();
  o.anonymous = true;
  HttpRequest r = s3_request(o, "GET", "bucket", "k", {}, {{"range", "bytes=0-9"}});
  EXPECT_EQ(header(r, "authorization"), "<missing>");
  EXPECT_EQ(header(r, "range"), "bytes=0-9");
}

TEST(ListObjectsTest, ParsesAPage) {
  const char* xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>img/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>img/a &amp; b.jpg</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>
    <ETag>"abc"</ETag><Size>123</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>img/&#x4e2d;.png</Key><Size>0</Size><ETag>"def"</ETag></Contents>
  <CommonPrefixes><Prefix>img/sub/</Prefix></CommonPrefixes>
  <NextContinuationToken>tok+/=</NextContinuationToken>
</ListBucketResult>)";
  auto page = parse_list_objects_v2(xml);
  ASSERT_TRUE(page.ok()) << page.error().to_string();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "img/a & b.jpg");
  EXPECT_EQ(page->objects[0].size, 123u);
  EXPECT_EQ(page->objects[0].etag, "\"abc\"");
  EXPECT_EQ(page->objects[1].key, "img/\xe4\xb8\xad.png");
  EXPECT_EQ(page->objects[1].size, 0u);
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "tok+/=");
  EXPECT_EQ(page->common_prefixes, std::vector<std::string>{"img/sub/"});
}

TEST(ListObjectsTest, RejectsMalformedDocuments) {
  for (const char* xml : {"", "<ListBucketResult><Contents>", "<Other/>",
                          "<ListBucketResult><Contents><Key>k</Key><Size>12x</Size></Contents></ListBucketResult>",
                          "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"}) {
    auto page = parse_list_objects_v2(xml);
    ASSERT_FALSE(page.ok()) << xml;
    EXPECT_EQ(page.error().code(), ErrorCode::kCorruptData);
  }
}

TEST(S3ErrorTest, ParsesErrorDocumentsOnly) {
  auto doc = parse_s3_error(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
      "<Key>k</Key></Error>");
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->code, "NoSuchKey");
  EXPECT_EQ(doc->message, "The specified key does not exist.");
  EXPECT_FALSE(parse_s3_error("<html>503 Service Unavailable</html>").has_value());
  EXPECT_FALSE(parse_s3_error("").has_value());
}

}  // namespace
}  // namespace mmfeed::storage
