// ListObjectsV2 against a real nginx (nginx_server.h) whose buckets answer as no S3 does: a
// repeated continuation token, a new one on every page, an answer that keeps growing. Each
// server route ends by itself (tests/support/servers/nginx.conf.in), so that a client without
// limits still finishes, its memory bounded by the route: the tests cannot hang.
#include "storage/listing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "nginx_server.h"

namespace mmfeed::storage {
namespace {

namespace fs = std::filesystem;

class ListingTest : public testing::NginxSuite<ListingTest> {
 public:
  static constexpr const char* kName = "mmfeed-listing";

 protected:
  // The server as an anonymous, path-style S3 endpoint.
  static S3Options s3() {
    S3Options o;
    o.endpoint = server_->endpoint();
    o.addressing = Addressing::kPath;
    o.anonymous = true;
    return o;
  }

  // One attempt per page: every failure here is final anyway, and a retry would only slow a
  // failing test.
  static ListOptions once() {
    ListOptions o;
    o.max_attempts = 1;
    return o;
  }
};

TEST_F(ListingTest, ARepeatedContinuationTokenEndsTheListing) {
  auto listed = list_objects(s3(), "listing-loop", "", once());
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code(), ErrorCode::kCorruptData);
  EXPECT_EQ(listed.error().to_string(),
            "s3://listing-loop/: ListObjectsV2: the server repeated the continuation token 'same-token' (page 2); "
            "listing stopped, it would never end");
}

// Issue 31: an answer's body was appended without a limit (an endless chunked body: 2 GB in
// 2.6 s). The route sends 64 MiB of keys, four times the page limit.
TEST_F(ListingTest, Issue31AnAnswerOverThePageLimitIsRefusedAsItArrives) {
  auto listed = list_objects(s3(), "listing-huge", "", once());
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(listed.error().to_string(),
            "s3://listing-huge/: ListObjectsV2: an answer of more than 16777216 bytes, the most one page may take "
            "(S3's pages are far smaller); stopped reading it");
}

// Issue 31: every page's keys were kept, and a server that names a new continuation token on
// every page was followed without end. The route gives one key a page, for 2000 pages.
TEST_F(ListingTest, Issue31AListingThatDoesNotEndStopsAtTheObjectLimit) {
  ListOptions options = once();
  options.max_objects = 100;
  auto listed = list_objects(s3(), "listing-endless", "keys/", options);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(listed.error().to_string(),
            "s3://listing-endless/keys/: ListObjectsV2: more than 100 objects, the most a listing keeps "
            "(--max-list-objects); list a narrower prefix or raise the limit");
}

// The same server with no key on any page: only the count of pages stops it.
TEST_F(ListingTest, Issue31AListingOfEmptyPagesThatDoesNotEndStopsAtThePageLimit) {
  ListOptions options = once();
  options.max_pages = 100;
  auto listed = list_objects(s3(), "listing-endless", "empty/", options);
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(listed.error().to_string(),
            "s3://listing-endless/empty/: ListObjectsV2: more than 100 pages, the most a listing asks for "
            "(--max-list-pages), and the server says there are more (0 objects so far); list a narrower prefix, use "
            "larger pages (--list-page-size) or raise the limit");
}

TEST_F(ListingTest, AListingAtItsLimitsIsWhole) {
  ListOptions options = once();
  options.max_objects = 2001;
  options.max_pages = 2001;
  auto listed = list_objects(s3(), "listing-endless", "keys/", options);
  ASSERT_TRUE(listed.ok()) << listed.error().to_string();
  ASSERT_EQ(listed->size(), 2001u);
  EXPECT_EQ(listed->front().key, "keys/0");
  EXPECT_EQ(listed->back().key, "keys/2000");
}

}  // namespace
}  // namespace mmfeed::storage
