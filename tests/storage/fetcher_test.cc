#include "storage/fetcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

namespace mmfeed::storage {
namespace {

class FetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mmfeed-fetch-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    for (int i = 0; i < 50; ++i) {
      std::ofstream(dir_ / (std::to_string(i) + ".bin"), std::ios::binary)
          << std::string(1000 + i * 37, char('a' + i % 26));
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ObjectUri file(int i) { return parse_uri((dir_ / (std::to_string(i) + ".bin")).string()).value(); }

  std::filesystem::path dir_;
};

TEST_F(FetcherTest, LocalFilesArriveWithTheirTags) {
  Fetcher fetcher({}, {});
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(fetcher.submit({file(i), static_cast<std::uint64_t>(i), std::nullopt}));
  fetcher.close();
  std::set<std::uint64_t> tags;
  while (auto r = fetcher.next()) {
    ASSERT_TRUE(r->data.ok()) << r->data.error().to_string();
    EXPECT_EQ(r->data->size(), 1000u + r->tag * 37);
    EXPECT_EQ(static_cast<char>(r->data->data()[0]), char('a' + r->tag % 26));
    tags.insert(r->tag);
  }
  EXPECT_EQ(tags.size(), 50u);
}

TEST_F(FetcherTest, ByteRangesOfLocalFiles) {
  Fetcher fetcher({}, {});
  ASSERT_TRUE(fetcher.submit({file(3), 0, ByteRange{10, 20}}));
  ASSERT_TRUE(fetcher.submit({file(3), 1, ByteRange{1100, 500}}));  // clipped at the end
  fetcher.close();
  std::map<std::uint64_t, std::size_t> sizes;
  while (auto r = fetcher.next()) sizes[r->tag] = r->data.value().size();
  EXPECT_EQ(sizes[0], 20u);
  EXPECT_EQ(sizes[1], 1000u + 3 * 37 - 1100);
}

TEST_F(FetcherTest, ErrorsNameTheUri) {
  Fetcher fetcher({}, {});
  ASSERT_TRUE(fetcher.submit({parse_uri((dir_ / "missing.bin").string()).value(), 7, std::nullopt}));
  ASSERT_TRUE(fetcher.submit({parse_uri(dir_.string()).value(), 8, std::nullopt}));
  fetcher.close();
  int n = 0;
  while (auto r = fetcher.next()) {
    ASSERT_FALSE(r->data.ok());
    EXPECT_NE(r->data.error().to_string().find(r->uri), std::string::npos);
    EXPECT_EQ(r->data.error().code(), r->tag == 7 ? ErrorCode::kNotFound : ErrorCode::kUnsupported);
    ++n;
  }
  EXPECT_EQ(n, 2);
}

// Cancel while requests are queued and in flight (some against a port nobody listens on, so
// they sit in retry back-off): every submitted request still yields exactly one result.
TEST_F(FetcherTest, CancelAccountsForEverySubmission) {
  for (int round = 0; round < 10; ++round) {
    FetchOptions options;
    options.max_inflight = 4;
    options.max_pending_results = 8;
    options.queue_capacity = 16;
    options.backoff_base_ms = 200;
    Fetcher fetcher(options, {});
    std::atomic<int> accepted{0};
    std::thread producer([&] {
      for (int i = 0; i < 200; ++i) {
        ObjectUri uri = i % 3 == 0 ? parse_uri("http://127.0.0.1:9/unreachable").value() : file(i % 50);
        if (!fetcher.submit({uri, static_cast<std::uint64_t>(i), std::nullopt})) break;
        ++accepted;
      }
    });
    int received = 0;
    int cancelled = 0;
    for (int i = 0; i < 5 + round; ++i) {
      if (fetcher.next()) ++received;
    }
    fetcher.cancel();
    producer.join();
    while (auto r = fetcher.next()) {
      ++received;
      if (!r->data.ok() && r->data.error().code() == ErrorCode::kCancelled) ++cancelled;
    }
    EXPECT_EQ(received, accepted.load()) << "round " << round;
    EXPECT_GT(cancelled, 0);
  }
}

// Issue 15: a FIFO as a local image blocked the reader in open() until a writer came (for ever),
// and with it the loader. It is refused by name, before anything waits on it.
TEST_F(FetcherTest, Issue15AFifoIsRefusedNotWaitedFor) {
  const auto fifo = dir_ / "image.jpg";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FetchOptions options;
  options.attempt_timeout_ms = 600'000;  // the refusal must not wait for a deadline
  auto fetcher = std::make_unique<Fetcher>(options, S3Options{});
  ASSERT_TRUE(fetcher->submit({parse_uri(fifo.string()).value(), 0, std::nullopt}));
  const auto r = fetcher->next_for(std::chrono::seconds(60));  // generous: only a hang misses it
  if (!r) {
    // Release the blocked open (a writer arrives), so that a failure here does not hang the suite.
    ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
    FAIL() << "the read of a FIFO did not return";
  }
  ASSERT_FALSE(r->data.ok());
  EXPECT_EQ(r->data.error().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(r->data.error().to_string(), "file://" + fifo.string() + ": cannot read: a FIFO, not a regular file");
}

// Issue 15: a local file's size is checked before memory is taken for it; a 100 GiB sparse file
// ended the process with std::bad_alloc.
TEST_F(FetcherTest, Issue15AFileOverTheSizeLimitIsRefusedBeforeReading) {
  const auto sparse = dir_ / "huge.bin";
  std::ofstream(sparse).close();
  std::filesystem::resize_file(sparse, 100ull << 30);
  FetchOptions options;
  options.max_object_bytes = 2000;
  Fetcher fetcher(options, {});
  ASSERT_TRUE(fetcher.submit({parse_uri(sparse.string()).value(), 0, std::nullopt}));
  ASSERT_TRUE(fetcher.submit({file(40), 1, std::nullopt}));        // 2480 bytes: over
  ASSERT_TRUE(fetcher.submit({file(40), 2, ByteRange{0, 2000}}));  // the range asked fits
  ASSERT_TRUE(fetcher.submit({file(1), 3, std::nullopt}));         // 1037 bytes: fits
  fetcher.close();
  std::map<std::uint64_t, FetchResult> results;
  while (auto r = fetcher.next()) results.emplace(r->tag, std::move(*r));
  ASSERT_EQ(results.size(), 4u);
  ASSERT_FALSE(results.at(0).data.ok());
  EXPECT_EQ(results.at(0).data.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(results.at(0).data.error().to_string(),
            "file://" + sparse.string() +
                ": file of 107374182400 bytes exceeds the object size limit of 2000 bytes "
                "(raise max_object_bytes, --max-object-bytes)");
  ASSERT_FALSE(results.at(1).data.ok());
  EXPECT_EQ(results.at(1).data.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(results.at(2).data.value().size(), 2000u);
  EXPECT_EQ(results.at(3).data.value().size(), 1037u);
}

TEST_F(FetcherTest, Issue15TheDefaultSizeLimitIsTheDecodersLimit) {
  EXPECT_EQ(FetchOptions{}.max_object_bytes, 512u << 20);
}

// Issue 15: "s3://bucket/" fetched as an object sent a ListObjects GET and handed back its XML as
// the object. It is refused by name, without a request.
TEST_F(FetcherTest, Issue15AnS3ObjectUriWithoutAKeyIsRefused) {
  S3Options s3;
  s3.endpoint = "http://127.0.0.1:9";  // nobody listens: a request would fail otherwise
  s3.anonymous = true;
  Fetcher fetcher({}, s3);
  ASSERT_TRUE(fetcher.submit({parse_uri("s3://bucket/").value(), 0, std::nullopt}));
  fetcher.close();
  auto r = fetcher.next();
  ASSERT_TRUE(r.has_value());
  ASSERT_FALSE(r->data.ok());
  EXPECT_EQ(r->data.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r->data.error().to_string().find("s3://bucket/: an S3 object URI needs a key"), std::string::npos)
      << r->data.error().to_string();
  EXPECT_EQ(r->attempts, 0);
}

TEST_F(FetcherTest, DestroyingAnOpenFetcherDoesNotHang) {
  Fetcher fetcher({}, {});
  ASSERT_TRUE(fetcher.submit({parse_uri("http://127.0.0.1:9/x").value(), 0, std::nullopt}));
}

}  // namespace
}  // namespace mmfeed::storage
