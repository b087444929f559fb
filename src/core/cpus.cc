#include "core/cpus.h"

#include <sched.h>

#include <charconv>
#include <fstream>
#include <string>

namespace mmfeed::core {

std::optional<int> cpu_max_cores(std::string_view cpu_max) {
  const std::size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota_text = cpu_max.substr(0, space);
  std::string_view period_text = cpu_max.substr(space + 1);
  while (!period_text.empty() && (period_text.back() == '\n' || period_text.back() == ' ')) period_text.remove_suffix(1);
  long long quota = 0, period = 0;
  if (quota_text == "max") return std::nullopt;
  auto parse = [](std::string_view text, long long& out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && out > 0;
  };
  if (!parse(quota_text, quota) || !parse(period_text, period)) return std::nullopt;
  return static_cast<int>((quota + period - 1) / period);
}

int usable_cpus() {
  int cpus = 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  std::ifstream file("/sys/fs/cgroup/cpu.max");
  std::string line;
  if (file && std::getline(file, line)) {
    if (const std::optional<int> quota = cpu_max_cores(line); quota && *quota < cpus) cpus = *quota;
  }
  return cpus < 1 ? 1 : cpus;
}

}  // namespace mmfeed::core
