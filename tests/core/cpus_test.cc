#include "core/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

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

// A cgroup v2 tree under a fresh folder, with cpu.max where `quotas` says, and a membership file
// naming `own` as the process's cgroup.
class CgroupTree {
 public:
  CgroupTree(const std::string& own, const std::map<std::string, std::string>& quotas)
      : base_(std::filesystem::temp_directory_path() / ("mmfeed_cgroup_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(base_);
    for (const auto& [where, quota] : quotas) {
      const auto folder = root() / std::filesystem::path(where).relative_path();
      std::filesystem::create_directories(folder);
      std::ofstream(folder / "cpu.max") << quota << "\n";
    }
    std::filesystem::create_directories(root() / std::filesystem::path(own).relative_path());
    std::ofstream(membership()) << "1:cpu:/\n0::" << own << "\n";
  }
  ~CgroupTree() { std::filesystem::remove_all(base_); }
  std::filesystem::path root() const { return base_ / "fs"; }
  std::filesystem::path membership() const { return base_ / "cgroup"; }

 private:
  std::filesystem::path base_;
};

TEST(CpusTest, ACgroupLimitIsQuotaOverPeriod) {
  const CgroupTree tree("/job", {{"/job", "150000 100000"}});
  EXPECT_EQ(cgroup_cpu_limit(tree.root(), tree.membership()), 1.5);
}

TEST(CpusTest, ACgroupLimitIsTheSmallestOnTheWayToTheRoot) {
  const CgroupTree below("/a/b", {{"/", "max 100000"}, {"/a", "200000 100000"}, {"/a/b", "400000 100000"}});
  EXPECT_EQ(cgroup_cpu_limit(below.root(), below.membership()), 2.0);
}

TEST(CpusTest, ACgroupWithoutAQuotaHasNoLimit) {
  const CgroupTree unlimited("/", {{"/", "max 100000"}});
  EXPECT_EQ(cgroup_cpu_limit(unlimited.root(), unlimited.membership()), std::nullopt);
  const CgroupTree absent("/x", {});  // cpu.max absent: cgroup v1, or the controller not enabled
  EXPECT_EQ(cgroup_cpu_limit(absent.root(), absent.membership()), std::nullopt);
  EXPECT_EQ(cgroup_cpu_limit(absent.root(), absent.root() / "no-such-file"), std::nullopt);
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
