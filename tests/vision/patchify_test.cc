#include "vision/patchify.h"

#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mmfeed::vision {
namespace {

// Restores the CPU's own SIMD targets when a test that narrowed them ends.
struct TargetScope {
  explicit TargetScope(std::int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~TargetScope() { hwy::SetSupportedTargetsForTest(0); }
};

std::vector<std::uint8_t> random_image(Grid g, const ModelProfile& p, std::mt19937& rng) {
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(g.h) * p.patch_size * g.w * p.patch_size * 3);
  for (auto& v : rgb) v = static_cast<std::uint8_t>(rng());
  return rgb;
}

// On every SIMD target this CPU runs, for the three profiles (P 14 and 16, two mean/std sets)
// and a one-frame variant, in every output type: the SIMD rows equal the table's bit for bit,
// on grids from one merge block up, and nothing is written past the last row.
template <class T>
void expect_simd_equals_table(const ModelProfile& p, const NormalizeTable& table, Pixels type, Grid g,
                              const std::vector<std::uint8_t>& rgb, const char* target) {
  const std::size_t n = static_cast<std::size_t>(g.rows()) * row_elements(p, type);
  std::vector<T> scalar(n), simd(n + 64, T{77});
  patchify(rgb.data(), g, p, table, type, scalar.data(), ImageKernel::kScalar);
  patchify(rgb.data(), g, p, table, type, simd.data(), ImageKernel::kAuto);
  ASSERT_EQ(std::memcmp(scalar.data(), simd.data(), n * sizeof(T)), 0)
      << target << " " << p.name << " T" << p.temporal_patch_size << " type " << static_cast<int>(type) << " grid "
      << g.h << "x" << g.w;
  for (std::size_t i = n; i < simd.size(); ++i) ASSERT_EQ(simd[i], T{77}) << "written past the rows";
}

TEST(PatchifyTest, SimdKernelsEqualTheTableOnEveryTarget) {
  std::mt19937 rng(7);
  std::vector<ModelProfile> profiles;
  for (const char* name : {"qwen2-vl", "qwen2.5-vl", "qwen3-vl"}) profiles.push_back(model_profile(name).value());
  ModelProfile one_frame = profiles[0];
  one_frame.temporal_patch_size = 1;
  profiles.push_back(one_frame);
  int exact_targets = 0;
  for (std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    TargetScope scope(target);
    for (const ModelProfile& p : profiles) {
      const NormalizeTable table(p);
      exact_targets += table.simd_exact;
      for (Grid g : {Grid{1, 2, 2}, Grid{1, 4, 6}, Grid{1, 10, 2}, Grid{1, 6, 18}}) {
        const auto rgb = random_image(g, p, rng);
        const char* name = hwy::TargetName(target);
        expect_simd_equals_table<float>(p, table, Pixels::kFloat32, g, rgb, name);
        expect_simd_equals_table<std::uint16_t>(p, table, Pixels::kBFloat16, g, rgb, name);
        expect_simd_equals_table<std::uint8_t>(p, table, Pixels::kUInt8, g, rgb, name);
      }
    }
  }
  // FMA targets (AVX2, AVX3) pass the table check; SSE4 has no fused multiply-add and uses the
  // table. A CPU with neither would take no SIMD path at all.
  std::string chosen = simd_target();
  if (chosen == "AVX2" || chosen == "AVX3" || chosen == "AVX3_DL") {
    EXPECT_GT(exact_targets, 0);
  }
}

// The reference formula, float32 steps after a float64 rescale, is what the table holds.
TEST(PatchifyTest, TableHoldsTheReferenceValues) {
  const ModelProfile p = model_profile("qwen2-vl").value();
  const NormalizeTable table(p);
  for (int c = 0; c < 3; ++c) {
    for (int v : {0, 1, 127, 128, 254, 255}) {
      const float x = static_cast<float>(v / 255.0);
      EXPECT_EQ(table.value[c][v], (x - p.mean[c]) / p.std[c]) << c << " " << v;
    }
  }
}

}  // namespace
}  // namespace mmfeed::vision
