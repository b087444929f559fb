#include "mmfeed/system.h"

#include "core/cpus.h"
#include "device/cuda_runtime.h"

namespace mmfeed {

int usable_cpus() { return core::usable_cpus(); }

std::optional<double> cgroup_cpu_limit() { return core::cgroup_cpu_limit("/sys/fs/cgroup", "/proc/self/cgroup"); }

std::string cuda_runtime_description() { return device::CudaRuntime::get().describe(); }

}  // namespace mmfeed
