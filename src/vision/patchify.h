// Normalize and patchify in one pass, written straight into the caller's memory (a batch
// buffer): each resized RGB pixel becomes exactly the reference's float32 value,
// ((x * (1/255) in float64, then float32) - mean) / std in float32, stored at its place in HF's
// patch order. The scalar kernel looks it up in a 256-entry table per channel; the SIMD kernel
// (float32 and bfloat16 output) computes it without division instructions and is used only
// where the table's constructor found it equal for all 256 values of each channel.
//
// Layouts (P = patch, m = merge, T = temporal patch; one row per patch):
//   kFloat32 / kBFloat16: rows of C*T*P*P, column ((c*T + t)*P + ph)*P + pw; the image is
//     repeated over t (a still image is T identical frames), exactly HF's pixel_values;
//   kUInt8: rows of C*P*P, column (c*P + ph)*P + pw, the resized pixel bytes before
//     normalization and without the temporal repeat - for normalizing on the GPU, where
//     pixel_values = (table[c][u8] repeated over t).
// Row r of an image with grid (1, gh, gw): r = ((bh*(gw/m) + bw)*m + mh)*m + mw, covering the
// pixels y = (bh*m + mh)*P + ph, x = (bw*m + mw)*P + pw.
//
// Example:
//   NormalizeTable table(profile);
//   std::vector<float> rows(grid.rows() * profile.row_width());
//   patchify(resized.data(), grid, profile, table, Pixels::kFloat32, rows.data());
#pragma once

#include <array>
#include <cstdint>

#include "mmfeed/choices.h"
#include "vision/profile.h"
#include "vision/resample.h"

namespace mmfeed::vision {

using ::mmfeed::Pixels;  // the pixel rows' element type (mmfeed/choices.h)

// kPil: HF's PIL image processors, ((x * (1/255) in float64, then float32) - mean) / std.
// kTorchvision: its torchvision processors (the video processors, and the image processors'
// torchvision backend), rescale fused into normalize: (x - mean * 255) / (std * 255), all float32.

struct NormalizeTable {
  explicit NormalizeTable(const ModelProfile& profile, ImageBackend how = ImageBackend::kPil);
  std::array<std::array<float, 256>, 3> value{};
  std::array<float, 3> mean{};  // as subtracted: times 255 for kTorchvision
  std::array<float, 3> std{};
  bool rescale = true;      // kPil: divide by 255 first
  bool simd_exact = false;  // the SIMD kernel gives `value` for every byte value and channel
};

// Bytes per element of `type`.
int element_size(Pixels type);
// Elements per row for `type`.
int row_elements(const ModelProfile& profile, Pixels type);

// `rgb` holds grid.h * P rows of grid.w * P pixels (3 bytes each). Writes grid.rows() rows of
// row_elements(profile, type) elements of `type` at `dest`. Unless `kernel` is kScalar, uint8
// goes through the SIMD kernel, and float32 and bfloat16 when table.simd_exact.
void patchify(const std::uint8_t* rgb, Grid grid, const ModelProfile& profile, const NormalizeTable& table, Pixels type,
              void* dest, ImageKernel kernel = ImageKernel::kAuto);

// One temporal group of a video: the temporal_patch_size frames at `frames` (each as `rgb`
// above), frame t in the rows' temporal slot t (kUInt8: rows of C*T*P*P, column
// ((c*T + t)*P + ph)*P + pw, unnormalized). grid.t is ignored: one group's grid.h * grid.w rows.
void patchify_group(const std::uint8_t* const* frames, Grid grid, const ModelProfile& profile,
                    const NormalizeTable& table, Pixels type, void* dest, ImageKernel kernel = ImageKernel::kAuto);

// float32 -> bfloat16, round to nearest even (NaN kept quiet).
std::uint16_t to_bfloat16(float f);

}  // namespace mmfeed::vision
