// The packer (pipeline/packer.h): rows of samples under a token budget.
#include "pipeline/packer.h"

#include <gtest/gtest.h>

#include <vector>

namespace mmfeed {
namespace {

TEST(PackerTest, FirstFitDecreasingKeepsRowsUnderTheBudget) {
  const std::vector<std::size_t> lengths = {5, 3, 4, 2};
  EXPECT_EQ(pipeline::pack_rows(lengths, 7), (std::vector<std::vector<std::size_t>>{{0, 3}, {2, 1}}));
  // Ties keep the window's order; a sample over the budget gets a row of its own.
  const std::vector<std::size_t> ties = {3, 3, 3, 9};
  EXPECT_EQ(pipeline::pack_rows(ties, 6), (std::vector<std::vector<std::size_t>>{{3}, {0, 1}, {2}}));
  EXPECT_TRUE(pipeline::pack_rows({}, 6).empty());
}

}  // namespace
}  // namespace mmfeed
