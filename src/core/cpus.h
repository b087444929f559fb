// How many CPUs this process may use: the cores in its affinity mask, lowered to the cgroup v2
// CPU quota (cpu.max) where one is set, as a container runtime or a scheduler sets it. A
// loader's `workers = 0` ("auto") is sized from it.
//
// Example:
//   const int cores = usable_cpus();                      // 16 on a 16-core node, 4 in a 4-CPU pod
//   const auto quota = cpu_max_cores("400000 100000");   // 4
#pragma once

#include <optional>
#include <string_view>

namespace mmfeed::core {

// The CPUs the process may run on (sched_getaffinity), at most the cgroup quota rounded up;
// at least 1.
int usable_cpus();

// The cores a cgroup v2 cpu.max line allows ("QUOTA PERIOD", rounded up); nullopt for "max"
// (no limit) or a line that does not parse.
std::optional<int> cpu_max_cores(std::string_view cpu_max);

}  // namespace mmfeed::core
