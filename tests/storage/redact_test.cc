// Issue 31: a presigned URL's signature and token, and a URL's user:password@, were written into
// errors, reports and traces. These are the rules of the one redaction every shown URI goes
// through (storage/redact.h).
#include "storage/redact.h"

#include <gtest/gtest.h>

#include <string>

#include "storage/uri.h"

namespace mmfeed::storage {
namespace {

TEST(RedactTest, Issue31APresignedS3UrlKeepsOnlyWhatIsNoCredential) {
  EXPECT_EQ(redact_uri("https://b.s3.amazonaws.com/k.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                       "&X-Amz-Credential=AKIDEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request"
                       "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-Security-Token=FwoGZX"
                       "&X-Amz-SignedHeaders=host&X-Amz-Signature=9f3a&versionId=v1"),
            "https://b.s3.amazonaws.com/k.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED"
            "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-Security-Token=REDACTED"
            "&X-Amz-SignedHeaders=host&X-Amz-Signature=REDACTED&versionId=v1");
}

TEST(RedactTest, Issue31TheOrderOfParametersDoesNotMatter) {
  EXPECT_EQ(redact_uri("http://h/a?X-Amz-Signature=s&x=1&X-Amz-Security-Token=t"),
            "http://h/a?X-Amz-Signature=REDACTED&x=1&X-Amz-Security-Token=REDACTED");
  EXPECT_EQ(redact_uri("http://h/a?x=1&sig=s"), "http://h/a?x=1&sig=REDACTED");
}

TEST(RedactTest, Issue31NamesAreMatchedWithoutRegardToCaseOrPercentEncoding) {
  EXPECT_EQ(redact_uri("http://h/a?x-amz-signature=s"), "http://h/a?x-amz-signature=REDACTED");
  EXPECT_EQ(redact_uri("http://h/a?X%2DAmz%2DSignature=s"), "http://h/a?X%2DAmz%2DSignature=REDACTED");
  EXPECT_EQ(redact_uri("http://h/a?ACCESS_TOKEN=t"), "http://h/a?ACCESS_TOKEN=REDACTED");
}

TEST(RedactTest, Issue31TheCredentialNamesOfOtherStoresAndOAuthAreRedacted) {
  for (const char* name :
       {"Signature", "AWSAccessKeyId", "X-Goog-Signature", "X-Goog-Credential", "sig", "token", "access_token",
        "password", "secret", "api_key", "apikey", "key", "client_secret", "refresh_token", "auth"}) {
    EXPECT_TRUE(is_credential_parameter(name)) << name;
  }
  for (const char* name : {"X-Amz-Expires", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Algorithm", "versionId", "se",
                           "sp", "partNumber", "response-content-type", "keys"}) {
    EXPECT_FALSE(is_credential_parameter(name)) << name;
  }
}

TEST(RedactTest, Issue31UserinfoIsReplacedWhateverItHolds) {
  EXPECT_EQ(redact_uri("https://user:pass@h:8443/a?x=1"), "https://REDACTED@h:8443/a?x=1");
  EXPECT_EQ(redact_uri("https://ghp_token@h/a"), "https://REDACTED@h/a");
  EXPECT_EQ(redact_uri("https://h/a@b"), "https://h/a@b");  // an '@' in the path is no userinfo
}

TEST(RedactTest, Issue31AFragmentsCredentialsAreRedactedToo) {
  EXPECT_EQ(redact_uri("https://h/cb#access_token=t&state=s"), "https://h/cb#access_token=REDACTED&state=s");
  EXPECT_EQ(redact_uri("https://h/a?token=t#part"), "https://h/a?token=REDACTED#part");
}

TEST(RedactTest, Issue31UrisWithoutCredentialsAreUnchanged) {
  for (const char* uri : {"https://h/a.jpg", "http://h/a.jpg?x=1&flag", "s3://bucket/train/a b.jpg",
                          "file:///data/a.jpg", "/data/a.jpg", "images/cat.jpg", "http://h/a?", "http://h/a?=v&&"}) {
    EXPECT_EQ(redact_uri(uri), uri);
  }
}

TEST(RedactTest, Issue31RedactionIsIdempotent) {
  const std::string once = redact_uri("https://u:p@h/a?X-Amz-Signature=s&token=t#sig=f");
  EXPECT_EQ(redact_uri(once), once);
  EXPECT_EQ(redact_uris_in(once), once);
}

TEST(RedactTest, Issue31S3UrisAreRedactedByTheSameRules) {
  EXPECT_EQ(redact_uri("s3://bucket/k?token=t"), "s3://bucket/k?token=REDACTED");
  auto s3 = parse_uri("s3://b/k.jpg?X-Amz-Signature=s");
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->key, "k.jpg?X-Amz-Signature=s");  // fetched by its key as given
  EXPECT_EQ(s3->to_string(), "s3://b/k.jpg?X-Amz-Signature=REDACTED");
}

TEST(RedactTest, Issue31EveryUrlInFreeTextIsRedacted) {
  EXPECT_EQ(redact_uris_in("https://h/a?sig=s1: HTTP 403; see http://u:p@g/b?token=t2, then ftp://h/x?password=p3."),
            "https://h/a?sig=REDACTED: HTTP 403; see http://REDACTED@g/b?token=REDACTED, then "
            "ftp://h/x?password=REDACTED.");
  EXPECT_EQ(redact_uris_in("bad URL \"https://h/a?sig=s\" in line 3"),
            "bad URL \"https://h/a?sig=REDACTED\" in line 3");
  EXPECT_EQ(redact_uris_in("(HTTPS://h/a?Signature=s)"), "(HTTPS://h/a?Signature=REDACTED)");
}

TEST(RedactTest, Issue31TextQuotingARedactedUrlKeepsWhatFollowsIt) {
  const std::string id = "https://h/m.jsonl?X-Amz-Signature=REDACTED:17";  // a sample's manifest:line
  EXPECT_EQ(redact_uris_in(id + ": HTTP 403"), id + ": HTTP 403");
}

TEST(RedactTest, Issue31TextWithoutUrlsIsUnchanged) {
  for (const char* text : {"", "JPEG truncated after 10 of 20 bytes", "a :// without a scheme", "://", "x://",
                           "sample 17: token=abc is no URL"}) {
    EXPECT_EQ(redact_uris_in(text), text);
  }
}

TEST(RedactTest, Issue31AShownHttpUriIsRedactedWhileItsUrlIsFetchedAsGiven) {
  const std::string given = "https://h/a.jpg?X-Amz-Expires=60&X-Amz-Signature=s";
  auto uri = parse_uri(given);
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->url, given);
  EXPECT_EQ(uri->to_string(), "https://h/a.jpg?X-Amz-Expires=60&X-Amz-Signature=REDACTED");
}

TEST(RedactTest, Issue31AUriThatDoesNotParseIsNamedRedacted) {
  auto uri = parse_uri("https://u:p@h/a b?X-Amz-Signature=s");
  ASSERT_FALSE(uri.ok());
  EXPECT_EQ(uri.error().to_string(),
            "https://REDACTED@h/a b?X-Amz-Signature=REDACTED: URL contains whitespace; percent-encode it");
  auto bucket = parse_uri("s3://u:p@bucket/k");
  ASSERT_FALSE(bucket.ok());
  EXPECT_EQ(bucket.error().to_string(), "s3://REDACTED@bucket/k: invalid character in bucket name (':')");
}

}  // namespace
}  // namespace mmfeed::storage
