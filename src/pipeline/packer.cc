#include "pipeline/packer.h"

#include <algorithm>
#include <numeric>

namespace mmfeed::pipeline {

std::vector<std::vector<std::size_t>> pack_rows(std::span<const std::size_t> lengths, std::size_t budget) {
  std::vector<std::size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return lengths[a] > lengths[b]; });
  std::vector<std::vector<std::size_t>> rows;
  std::vector<std::size_t> used;
  for (std::size_t i : order) {
    std::size_t r = 0;
    while (r < rows.size() && used[r] + lengths[i] > budget) ++r;
    if (r == rows.size()) {
      rows.emplace_back();
      used.push_back(0);
    }
    used[r] += lengths[i];
    rows[r].push_back(i);
  }
  return rows;
}

}  // namespace mmfeed::pipeline
