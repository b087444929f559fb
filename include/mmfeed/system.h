// What the machine gives the engine: the CPUs this process may use, and the CUDA runtime that
// page-locks batch memory and copies batches to a GPU (loaded at run time, when present).
//
// Example:
//   std::printf("%d CPUs; %s\n", mmfeed::usable_cpus(), mmfeed::cuda_runtime_description().c_str());
#pragma once

#include <optional>
#include <string>

namespace mmfeed {

// The CPUs this process may use, as workers = 0 ("auto") counts them: its CPU affinity, capped by
// the smallest cgroup v2 cpu.max quota from its cgroup up to the root (rounded up).
int usable_cpus();

// That smallest cgroup v2 quota (quota / period, in cores), or nullopt where none is set.
std::optional<double> cgroup_cpu_limit();

// The CUDA runtime found at run time and its devices, or why none was.
std::string cuda_runtime_description();

}  // namespace mmfeed
