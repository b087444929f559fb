#include "core/cpus.h"

#include <sched.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <string>

namespace mmfeed::core {
namespace {

// QUOTA and PERIOD of a cpu.max line, both positive; nullopt for "max" or what does not parse.
std::optional<std::pair<long long, long long>> parse_cpu_max(std::string_view cpu_max) {
  const std::size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota_text = cpu_max.substr(0, space);
  std::string_view period_text = cpu_max.substr(space + 1);
  while (!period_text.empty() && (period_text.back() == '\n' || period_text.back() == ' '))
    period_text.remove_suffix(1);
  if (quota_text == "max") return std::nullopt;
  auto parse = [](std::string_view text, long long& out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && out > 0;
  };
  long long quota = 0, period = 0;
  if (!parse(quota_text, quota) || !parse(period_text, period)) return std::nullopt;
  return std::pair{quota, period};
}

}  // namespace

std::optional<int> cpu_max_cores(std::string_view cpu_max) {
  const auto parsed = parse_cpu_max(cpu_max);
  if (!parsed) return std::nullopt;
  return static_cast<int>((parsed->first + parsed->second - 1) / parsed->second);
}

std::optional<double> cgroup_cpu_limit(const std::filesystem::path& root, const std::filesystem::path& membership) {
  std::ifstream file(membership);
  std::string line, own;
  bool found = false;
  while (std::getline(file, line)) {
    if (line.rfind("0::", 0) == 0) {
      own = line.substr(3);
      found = true;
      break;
    }
  }
  if (!found) return std::nullopt;
  std::optional<double> limit;
  for (std::filesystem::path level = std::filesystem::path(own).relative_path();; level = level.parent_path()) {
    std::ifstream cpu_max(root / level / "cpu.max");
    std::string text;
    if (cpu_max && std::getline(cpu_max, text)) {
      if (const auto parsed = parse_cpu_max(text)) {
        const double cores = static_cast<double>(parsed->first) / static_cast<double>(parsed->second);
        if (!limit || cores < *limit) limit = cores;
      }
    }
    if (level.empty()) break;
  }
  return limit;
}

int usable_cpus() {
  int cpus = 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  if (const auto limit = cgroup_cpu_limit("/sys/fs/cgroup", "/proc/self/cgroup")) {
    const int quota = static_cast<int>(std::ceil(*limit));
    if (quota < cpus) cpus = quota;
  }
  return cpus < 1 ? 1 : cpus;
}

}  // namespace mmfeed::core
