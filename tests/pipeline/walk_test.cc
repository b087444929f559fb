// A sample's bytes held one way (pipeline/media_bytes.h): objects, a shard span and decoded cells
// release by one rule, every byte counted; and the run's walk (pipeline/walk.h): the positions of
// run_order epoch by epoch, from a resume's position, each epoch closed by its end step.
#include <gtest/gtest.h>

#include <cstring>

#include "pipeline/media_bytes.h"
#include "pipeline/walk.h"

namespace mmfeed::pipeline {
namespace {

dataset::MediaSource member(std::uint64_t offset, std::uint64_t length) {
  return dataset::MediaSource{storage::parse_uri("s3://b/shard-0.tar").value(), storage::ByteRange{offset, length}, "m",
                              nullptr};
}

core::Buffer filled(core::BufferPool& pool, std::string_view text) {
  core::Buffer b = pool.acquire(text.size());
  std::memcpy(b.data(), text.data(), text.size());
  return b;
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

TEST(MediaBytesTest, ObjectsAreFetchedOneEachAndFreedOneEach) {
  core::BufferPool pool;
  MediaBytes bytes;
  bytes.plan_objects({member(0, 3), member(100, 2)});
  ASSERT_EQ(bytes.blocks(), 2u);
  EXPECT_EQ(bytes.fetch(1, 7).range->offset, 100u);
  EXPECT_EQ(bytes.fetch(1, 7).tag, 7u);
  const std::int64_t first = bytes.fill(0, filled(pool, "abc"));
  const std::int64_t second = bytes.fill(1, filled(pool, "de"));
  EXPECT_EQ(bytes.held(), first + second);
  EXPECT_EQ(text_of(bytes.medium(1)), "de");
  EXPECT_EQ(bytes.release(0), first);
  EXPECT_EQ(bytes.release(0), 0);  // twice frees nothing more
  EXPECT_TRUE(bytes.medium(0).empty());
  EXPECT_EQ(text_of(bytes.medium(1)), "de");
  EXPECT_EQ(bytes.release(1), second);
  EXPECT_EQ(bytes.held(), 0);
}

TEST(MediaBytesTest, ASpanIsFreedWithItsLastMedium) {
  core::BufferPool pool;
  MediaBytes bytes;
  bytes.plan_span(member(10, 9), {{0, 3}, {6, 3}});
  ASSERT_EQ(bytes.blocks(), 1u);
  EXPECT_EQ(bytes.fetch(0, 0).range->offset, 10u);
  EXPECT_EQ(bytes.fetch(0, 0).range->length, 9u);
  const std::int64_t held = bytes.fill(0, filled(pool, "abc...xyz"));
  EXPECT_EQ(text_of(bytes.medium(0)), "abc");
  EXPECT_EQ(text_of(bytes.medium(1)), "xyz");
  EXPECT_EQ(bytes.release(1), 0);
  EXPECT_EQ(bytes.release(1), 0);  // released twice: still one medium, the span stays
  EXPECT_EQ(text_of(bytes.medium(0)), "abc");
  EXPECT_EQ(bytes.release(0), held);
  EXPECT_EQ(bytes.held(), 0);
}

TEST(MediaBytesTest, AShortSpanGivesNoBytesPastItsEnd) {
  core::BufferPool pool;
  MediaBytes bytes;
  bytes.plan_span(member(0, 9), {{0, 3}, {6, 3}});
  (void)bytes.fill(0, filled(pool, "abc..x"));  // the server sent 6 bytes of 9
  EXPECT_EQ(text_of(bytes.medium(0)), "abc");
  EXPECT_TRUE(bytes.medium(1).empty());
}

TEST(MediaBytesTest, DecodedCellsReplaceTheFetchedBlocks) {
  core::BufferPool pool;
  MediaBytes bytes;
  bytes.plan_objects({member(0, 3), member(100, 2)});
  const std::int64_t fetched = bytes.fill(0, filled(pool, "abc")) + bytes.fill(1, filled(pool, "de"));
  std::vector<std::byte> decoded(5);
  std::memcpy(decoded.data(), "PQRST", 5);
  const auto capacity = static_cast<std::int64_t>(decoded.capacity());
  EXPECT_EQ(bytes.replace(std::move(decoded), {{3, 2}, {0, 3}}), capacity - fetched);
  EXPECT_EQ(bytes.held(), capacity);
  EXPECT_EQ(text_of(bytes.medium(0)), "ST");
  EXPECT_EQ(text_of(bytes.medium(1)), "PQR");
  EXPECT_EQ(bytes.release(0), 0);
  EXPECT_EQ(bytes.release(1), capacity);
  EXPECT_EQ(bytes.held(), 0);
}

// Every step of a walk, as "epoch:seq=index" and "epoch:end".
std::vector<std::string> steps(Walk walk) {
  std::vector<std::string> out;
  while (auto s = walk.next()) {
    out.push_back(std::to_string(s->epoch) + (s->end ? ":end/" + std::to_string(s->epoch_size)
                                                     : ":" + std::to_string(s->seq) + "=" + std::to_string(s->index)));
  }
  return out;
}

TEST(WalkTest, EveryPositionOfEveryEpochInTheRunsOrder) {
  const Population population(10);
  OrderOptions options;
  options.seed = 3;
  options.rank = 1;
  options.world_size = 4;
  options.epochs = 2;
  std::vector<std::string> expected;
  for (int epoch = 0; epoch < 2; ++epoch) {
    const std::vector<std::uint64_t> order = run_order(population, options, LoaderState{}, epoch).all();
    for (std::size_t i = 0; i < order.size(); ++i) {
      expected.push_back(std::to_string(epoch) + ":" + std::to_string(i) + "=" + std::to_string(order[i]));
    }
    expected.push_back(std::to_string(epoch) + ":end/" + std::to_string(order.size()));
  }
  EXPECT_EQ(steps(Walk(population, options, LoaderState{})), expected);
}

TEST(WalkTest, AResumeStartsAtItsPositionAndAnEmptyEpochStillEnds) {
  const Population population(3);
  OrderOptions options;
  options.world_size = 4;  // rank 3 of 4 has no sample of 3 (shard_remainder kKeep)
  options.rank = 3;
  options.remainder = ShardRemainder::kKeep;
  options.epochs = 2;
  EXPECT_EQ(steps(Walk(population, options, LoaderState{})), (std::vector<std::string>{"0:end/0", "1:end/0"}));
  options.rank = 0;
  options.world_size = 1;
  LoaderState start;
  start.epoch = 1;
  start.position = 2;
  const std::vector<std::uint64_t> order = run_order(population, options, start, 1).all();
  EXPECT_EQ(steps(Walk(population, options, start)),
            (std::vector<std::string>{"1:2=" + std::to_string(order[2]), "1:end/3"}));
}

}  // namespace
}  // namespace mmfeed::pipeline
