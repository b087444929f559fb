#include "storage/response.h"

#include <gtest/gtest.h>

namespace mmfeed::storage {
namespace {

ResponseHeaders parse(std::initializer_list<std::string_view> lines) {
  ResponseHeaders h;
  for (std::string_view line : lines) (void)parse_header_line(line, h);
  return h;
}

// A 206 for bytes FIRST-LAST of an object of TOTAL bytes, with a matching Content-Length.
ResponseHeaders partial(std::uint64_t first, std::uint64_t last, std::uint64_t total, std::string etag = "\"v1\"") {
  ResponseHeaders h;
  h.status = 206;
  h.range_first = first;
  h.range_last = last;
  h.range_total = total;
  h.content_length = last - first + 1;
  h.etag = std::move(etag);
  return h;
}

TEST(ResponseHeadersTest, LinesAreClassified) {
  ResponseHeaders h;
  EXPECT_EQ(parse_header_line("HTTP/1.1 200 OK\r\n", h), HeaderLine::kStatusLine);
  EXPECT_EQ(parse_header_line("Content-Length: 12\r\n", h), HeaderLine::kField);
  EXPECT_EQ(parse_header_line("garbage\r\n", h), HeaderLine::kOther);
  EXPECT_EQ(parse_header_line("\r\n", h), HeaderLine::kEnd);
}

TEST(ResponseHeadersTest, FieldsAreTakenWhateverTheirCaseAndSpacing) {
  const auto h = parse({"HTTP/1.1 206 Partial Content\r\n", "content-LENGTH:   100 \r\n", "ETAG: \"abc\"\r\n",
                        "Content-Range: bytes 100-199/1000\r\n"});
  EXPECT_EQ(h.status, 206);
  EXPECT_EQ(h.content_length, 100u);
  EXPECT_EQ(h.etag, "\"abc\"");
  EXPECT_EQ(h.range_first, 100u);
  EXPECT_EQ(h.range_last, 199u);
  EXPECT_EQ(h.range_total, 1000u);
}

TEST(ResponseHeadersTest, ANewStatusLineForgetsTheResponseBefore) {
  const auto h = parse({"HTTP/1.1 302 Found\r\n", "Content-Length: 5\r\n", "ETag: \"old\"\r\n",
                        "Content-Range: bytes 0-4/5\r\n", "\r\n", "HTTP/1.1 200 OK\r\n"});
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.content_length, kUnknown);
  EXPECT_EQ(h.etag, "");
  EXPECT_EQ(h.range_first, kUnknown);
  EXPECT_EQ(h.range_total, kUnknown);
}

TEST(ResponseHeadersTest, ANumberThatDoesNotParseIsUnknown) {
  EXPECT_EQ(parse({"HTTP/1.1 200 OK\r\n", "Content-Length: 12x\r\n"}).content_length, kUnknown);
  EXPECT_EQ(parse({"HTTP/1.1 200 OK\r\n", "Content-Length: -1\r\n"}).content_length, kUnknown);
}

TEST(ResponseHeadersTest, AnUnsatisfiedRangesTotalIsNotAFirstByte) {
  const auto h = parse({"HTTP/1.1 416 Range Not Satisfiable\r\n", "Content-Range: bytes */0\r\n"});
  EXPECT_EQ(h.range_first, kUnknown);
  EXPECT_EQ(h.range_last, kUnknown);
}

TEST(CheckAnswerTest, A206ForTheBytesAskedPasses) {
  EXPECT_FALSE(check_answer(partial(100, 199, 1000), AskedRange{100, 199}, std::nullopt));
}

TEST(CheckAnswerTest, A206ClippedAtTheObjectsEndPasses) {
  EXPECT_FALSE(check_answer(partial(0, 499, 500), AskedRange{0, 8388607}, std::nullopt));
}

TEST(CheckAnswerTest, A200ToARangedRequestPasses) {
  ResponseHeaders h;
  h.status = 200;
  h.content_length = 500;
  EXPECT_FALSE(check_answer(h, AskedRange{0, 99}, std::nullopt));
}

TEST(CheckAnswerTest, A206WhoseContentRangeDisagreesWithTheRequestIsRefused) {
  const auto refusal = check_answer(partial(0, 99, 1000), AskedRange{100, 199}, std::nullopt);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, ErrorCode::kIoError);
  EXPECT_FALSE(refusal->object_changed);
  EXPECT_EQ(
      refusal->message,
      "206 answer for other bytes than asked (asked bytes=100-199, got status 206, Content-Range bytes 0-99/1000)");
}

TEST(CheckAnswerTest, A206ShorterThanAskedIsRefused) {
  const auto refusal = check_answer(partial(0, 49, 1000), AskedRange{0, 99}, std::nullopt);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->message.rfind("206 answer for other bytes than asked", 0), 0u) << refusal->message;
}

TEST(CheckAnswerTest, A206WithoutContentRangeIsRefused) {
  ResponseHeaders h;
  h.status = 206;
  h.content_length = 100;
  const auto refusal = check_answer(h, AskedRange{0, 99}, std::nullopt);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, ErrorCode::kIoError);
  EXPECT_EQ(refusal->message,
            "206 answer without a valid Content-Range (asked bytes=0-99, got status 206, no usable Content-Range)");
}

TEST(CheckAnswerTest, A206WhoseLastByteIsPastTheTotalIsRefused) {
  const auto refusal = check_answer(partial(0, 1000, 1000), AskedRange{0, 1000}, std::nullopt);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->message.rfind("206 answer without a valid Content-Range", 0), 0u) << refusal->message;
}

TEST(CheckAnswerTest, AContentLengthThatDisagreesWithContentRangeIsRefused) {
  auto h = partial(0, 99, 1000);
  h.content_length = 50;
  const auto refusal = check_answer(h, AskedRange{0, 99}, std::nullopt);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->message,
            "Content-Length 50 disagrees with Content-Range (asked bytes=0-99, got status 206, "
            "Content-Range bytes 0-99/1000)");
}

TEST(CheckAnswerTest, APartWithTheProbesSizeAndEtagPasses) {
  EXPECT_FALSE(check_answer(partial(100, 199, 1000), AskedRange{100, 199}, PartExpectation{1000, "\"v1\""}));
}

TEST(CheckAnswerTest, APartWithAnotherEtagMeansTheObjectChanged) {
  const auto refusal =
      check_answer(partial(100, 199, 1000, "\"v2\""), AskedRange{100, 199}, PartExpectation{1000, "\"v1\""});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, ErrorCode::kUnavailable);
  EXPECT_TRUE(refusal->object_changed);
  EXPECT_EQ(refusal->message, "the object changed during the fetch (ETag \"v1\", then \"v2\")");
}

TEST(CheckAnswerTest, APartWithoutAnEtagWhenTheProbeHadOneMeansTheObjectChanged) {
  const auto refusal = check_answer(partial(100, 199, 1000, ""), AskedRange{100, 199}, PartExpectation{1000, "\"v1\""});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->message, "the object changed during the fetch (ETag \"v1\", then none)");
}

TEST(CheckAnswerTest, APartIsNotCheckedForAnEtagTheProbeDidNotHave) {
  EXPECT_FALSE(check_answer(partial(100, 199, 1000, "\"any\""), AskedRange{100, 199}, PartExpectation{1000, ""}));
}

TEST(CheckAnswerTest, APartOfAnObjectOfAnotherSizeIsRefused) {
  const auto refusal = check_answer(partial(100, 199, 2000), AskedRange{100, 199}, PartExpectation{1000, "\"v1\""});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, ErrorCode::kIoError);
  EXPECT_FALSE(refusal->object_changed);
  EXPECT_EQ(refusal->message.rfind("part answer does not match the request", 0), 0u) << refusal->message;
}

TEST(CheckAnswerTest, APartAnsweredWholeIsRefused) {
  ResponseHeaders h;
  h.status = 200;
  h.content_length = 1000;
  const auto refusal = check_answer(h, AskedRange{100, 199}, PartExpectation{1000, ""});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->message,
            "part answer does not match the request (asked bytes=100-199, got status 200, no usable Content-Range)");
}

TEST(CheckObjectSizeTest, AContentLengthOverTheObjectLimitIsRefused) {
  const auto refusal = check_object_size(107374182400, "Content-Length", 512u << 20, "max_object_bytes");
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refusal->message,
            "object of 107374182400 bytes (Content-Length) exceeds the object size limit of 536870912 bytes "
            "(raise max_object_bytes, --max-object-bytes)");
}

TEST(CheckObjectSizeTest, AnObjectOfExactlyTheLimitFits) {
  EXPECT_FALSE(check_object_size(1000, "Content-Length", 1000, "max_object_bytes"));
  EXPECT_TRUE(check_object_size(1001, "Content-Length", 1000, "max_object_bytes"));
}

TEST(CheckObjectSizeTest, TheRefusalNamesTheOptionThatSetTheLimit) {
  const auto refusal = check_object_size(2000, "Content-Length", 1000, "max_buffered_bytes");
  ASSERT_TRUE(refusal);
  EXPECT_TRUE(refusal->message.ends_with("(raise max_buffered_bytes, --max-buffered-bytes)")) << refusal->message;
}

TEST(CheckBodyCompleteTest, ABodyOfItsContentLengthIsComplete) {
  ResponseHeaders h;
  h.status = 200;
  h.content_length = 10;
  EXPECT_FALSE(check_body_complete(h, 10, false, 10, "http://h/a"));
}

TEST(CheckBodyCompleteTest, ABodyShorterThanItsContentLengthIsTruncated) {
  ResponseHeaders h;
  h.status = 200;
  h.content_length = 10;
  const auto error = check_body_complete(h, 4, false, 10, "http://h/a");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code(), ErrorCode::kIoError);
  EXPECT_EQ(error->to_string(), "http://h/a: truncated body: 4 of 10 bytes");
}

TEST(CheckBodyCompleteTest, APartShorterThanItsRangeIsTruncated) {
  ResponseHeaders h;
  h.status = 206;
  const auto error = check_body_complete(h, 60, true, 100, "http://h/a");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->to_string(), "http://h/a: truncated part: 60 of 100 bytes");
}

TEST(CheckBodyCompleteTest, ABodyOfUnknownLengthIsCompleteWhenItEnds) {
  ResponseHeaders h;
  h.status = 200;
  EXPECT_FALSE(check_body_complete(h, 12345, false, 12345, "http://h/a"));
}

}  // namespace
}  // namespace mmfeed::storage
