// The option table (mmfeed/loader_options.h): each option's text form reads back as the value
// it describes, and what an option does not take is refused by name.
#include "mmfeed/loader_options.h"

#include "pipeline/config.h"

#include <gtest/gtest.h>

namespace mmfeed {
namespace {

TEST(LoaderOptionsTest, EachDefaultReadsBackAsTheDefault) {
  const LoaderConfig defaults;
  for (const LoaderOptionInfo& o : loader_options()) {
    if (o.type.starts_with("list[")) continue;  // a list option appends; its default is empty
    LoaderConfig c;
    (void)set_loader_option(c, o.name, "1");  // away from the default where the type takes it
    ASSERT_TRUE(set_loader_option(c, o.name, o.default_text).ok()) << o.name;
    bool same = false;
    for_each_loader_option([&](const char* name, auto member, const char*) {
      if (o.name == name) same = c.*member == defaults.*member;
    });
    EXPECT_TRUE(same) << o.name << " = " << o.default_text;
  }
}

TEST(LoaderOptionsTest, ChoicesAreSetByName) {
  LoaderConfig c;
  ASSERT_TRUE(set_loader_option(c, "shard_remainder", "drop").ok());
  EXPECT_EQ(c.shard_remainder, ShardRemainder::kDrop);
  ASSERT_TRUE(set_loader_option(c, "mode", "serial").ok());
  EXPECT_EQ(c.mode, Mode::kSerial);
  EXPECT_EQ(choice_name(OnError::kFail), "fail");
  EXPECT_EQ(choice_list<ShardRemainder>(), "pad, drop or keep");
}

TEST(LoaderOptionsTest, WhatAnOptionDoesNotTakeIsRefusedByName) {
  LoaderConfig c;
  const Status choice = set_loader_option(c, "on_error", "ignore");
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.error().message(), "on_error takes skip or fail, not 'ignore'");
  EXPECT_FALSE(set_loader_option(c, "batch_size", "-1").ok());
  EXPECT_FALSE(set_loader_option(c, "batch_size", "8x").ok());
  EXPECT_FALSE(set_loader_option(c, "shuffle", "yes").ok());
  EXPECT_FALSE(set_loader_option(c, "max_error_fraction", "nan").ok());
  const Status unknown = set_loader_option(c, "batchsize", "8");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message(), "unknown loader option 'batchsize'");
}

TEST(LoaderOptionsTest, AListOptionAppends) {
  LoaderConfig c;
  ASSERT_TRUE(set_loader_option(c, "manifests", "a.jsonl").ok());
  ASSERT_TRUE(set_loader_option(c, "manifests", "s3://b/k.jsonl").ok());
  EXPECT_EQ(c.manifests, (std::vector<std::string>{"a.jsonl", "s3://b/k.jsonl"}));
}

TEST(LoaderOptionsTest, AutoWorkersAreTheRanksShareOfTheCoresLessOneForTheTrainer) {
  LoaderConfig c;
  ASSERT_TRUE(set_loader_option(c, "workers", "auto").ok());
  EXPECT_EQ(c.workers, 0);
  c.prefetch_batches = 4;
  ASSERT_TRUE(set_loader_option(c, "prefetch_batches", "auto").ok());  // the other automatic option
  EXPECT_EQ(c.prefetch_batches, 0u);
  EXPECT_EQ(pipeline::auto_workers(16, nullptr), 15);
  EXPECT_EQ(pipeline::auto_workers(16, "8"), 1);  // eight ranks do not each start sixteen threads
  EXPECT_EQ(pipeline::auto_workers(64, "4"), 15);
  EXPECT_EQ(pipeline::auto_workers(2, nullptr), 1);
  EXPECT_EQ(pipeline::auto_workers(1, nullptr), 1);
  EXPECT_EQ(pipeline::auto_workers(16, "zero"), 15);  // an unreadable LOCAL_WORLD_SIZE: one rank
}

}  // namespace
}  // namespace mmfeed
