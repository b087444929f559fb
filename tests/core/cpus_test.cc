#include "core/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

namespace mmfeed::core {
namespace {

TEST(CpusTest, ACgroupQuotaIsRoundedUpToWholeCores) {
  EXPECT_EQ(cpu_max_cores("400000 100000"), 4);
  EXPECT_EQ(cpu_max_cores("150000 100000\n"), 2);
  EXPECT_EQ(cpu_max_cores("50000 100000"), 1);
}

TEST(CpusTest, NoQuotaOrAnUnreadableLineIsNoLimit) {
  EXPECT_EQ(cpu_max_cores("max 100000"), std::nullopt);
  EXPECT_EQ(cpu_max_cores(""), std::nullopt);
  EXPECT_EQ(cpu_max_cores("abc 100000"), std::nullopt);
  EXPECT_EQ(cpu_max_cores("0 100000"), std::nullopt);
}

TEST(CpusTest, TheUsableCpusAreAtMostTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_GE(usable_cpus(), 1);
  EXPECT_LE(usable_cpus(), CPU_COUNT(&set));
}

}  // namespace
}  // namespace mmfeed::core
