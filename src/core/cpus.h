// How many CPUs this process may use: the cores in its affinity mask, lowered to the smallest
// cgroup v2 CPU quota (cpu.max) on the way from the process's own cgroup up to the root, as a
// container runtime or a scheduler (Slurm, Kubernetes, systemd) sets it. A loader's
// `workers = 0` ("auto") is sized from it, and `mmfeed bench` gives each system that budget
// (through `mmfeed._mmfeed.usable_cpus`), so both count cores the same way.
//
// Example:
//   const int cores = usable_cpus();                      // 16 on a 16-core node, 4 in a 4-CPU pod
//   const auto quota = cpu_max_cores("400000 100000");   // 4
//   const auto limit = cgroup_cpu_limit("/sys/fs/cgroup", "/proc/self/cgroup");   // 1.5, or nullopt
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

namespace mmfeed::core {

// The CPUs the process may run on (sched_getaffinity), at most the cgroup limit rounded up (a
// quota of 1.5 cores keeps two threads busy part of the time); at least 1.
int usable_cpus();

// The cores a cgroup v2 cpu.max line allows ("QUOTA PERIOD", rounded up); nullopt for "max"
// (no limit) or a line that does not parse.
std::optional<int> cpu_max_cores(std::string_view cpu_max);

// The smallest cpu.max quota, in cores (quota / period), from the cgroup that `membership` (a
// /proc/PID/cgroup file, its "0::PATH" line) names down to `root` (where cgroup v2 is mounted)
// and at `root` itself; nullopt where no level sets one, or cgroup v2 is not there. A container
// sees its own cgroup as the root, so its limit is found too.
std::optional<double> cgroup_cpu_limit(const std::filesystem::path& root, const std::filesystem::path& membership);

}  // namespace mmfeed::core
