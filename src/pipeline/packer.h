// The packer: samples' token counts in, rows of at most a token budget out. Pure (no threads, no
// samples), so the Loader's packed batches are a function of the lengths alone.
//
// First-fit decreasing over a window: the longest samples first, each into the first row with
// room; rows come out in the order they were opened, each listing its samples' indices in the
// order they were placed. Deterministic for a window (ties keep the window's order). A sample
// longer than the budget gets a row of its own (the Loader refuses such samples before).
//
// Example:
//   pack_rows({5, 3, 4, 2}, /*budget=*/7)   // {{0, 3}, {2, 1}}: 5 + 2, then 4 + 3
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace mmfeed::pipeline {

std::vector<std::vector<std::size_t>> pack_rows(std::span<const std::size_t> lengths, std::size_t budget);

}  // namespace mmfeed::pipeline
