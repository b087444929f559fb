#include "vision/decode.h"

#include <gtest/gtest.h>

#include <vector>

#include "vision/patchify.h"

namespace mmfeed::vision {
namespace {

std::vector<std::uint8_t> tiff_with_orientation(bool little, std::uint16_t value) {
  std::vector<std::uint8_t> t = little ? std::vector<std::uint8_t>{'I', 'I', 42, 0, 8, 0, 0, 0}
                                       : std::vector<std::uint8_t>{'M', 'M', 0, 42, 0, 0, 0, 8};
  auto put16 = [&](std::uint16_t v) {
    if (little) {
      t.push_back(v & 0xFF), t.push_back(v >> 8);
    } else {
      t.push_back(v >> 8), t.push_back(v & 0xFF);
    }
  };
  put16(2);                                          // two entries
  put16(0x010F), put16(2), put16(0), put16(4), put16(0), put16(0);  // Make (ignored)
  put16(0x0112), put16(3), put16(0), put16(1), put16(value), put16(0);
  return t;
}

TEST(ExifTest, ReadsOrientationInBothByteOrders) {
  for (bool little : {true, false}) {
    for (std::uint16_t v = 1; v <= 8; ++v) EXPECT_EQ(exif_orientation(tiff_with_orientation(little, v)), v);
  }
}

TEST(ExifTest, MalformedOrOutOfRangeMeansUpright) {
  EXPECT_EQ(exif_orientation({}), 1);
  EXPECT_EQ(exif_orientation(tiff_with_orientation(true, 9)), 1);
  auto t = tiff_with_orientation(true, 6);
  t.resize(20);  // entries cut off
  EXPECT_EQ(exif_orientation(t), 1);
  std::vector<std::uint8_t> bad_offset = {'I', 'I', 42, 0, 0xFF, 0xFF, 0, 0};
  EXPECT_EQ(exif_orientation(bad_offset), 1);
}

TEST(OrientationTest, RotationsCompose) {
  RgbImage img;
  img.width = 3;
  img.height = 2;
  for (int i = 0; i < 6; ++i) img.pixels.insert(img.pixels.end(), {std::uint8_t(i), 0, 0});
  // 6 (rotate 270) then 8 (rotate 90) is the identity; 3 twice is the identity.
  EXPECT_EQ(apply_orientation(apply_orientation(img, 6), 8).pixels, img.pixels);
  EXPECT_EQ(apply_orientation(apply_orientation(img, 3), 3).pixels, img.pixels);
  const RgbImage r = apply_orientation(img, 6);
  EXPECT_EQ(r.width, 2);
  EXPECT_EQ(r.height, 3);
  EXPECT_EQ(r.pixels[0], 3);  // top-left of a clockwise turn is the bottom-left source pixel
}

TEST(DecodeTest, RejectsUnknownAndEmptyInput) {
  const std::vector<std::uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 0, 0, 0, 0, 0, 0};
  auto r = decode_rgb(gif);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCorruptData);
  EXPECT_FALSE(decode_rgb({}).ok());
  EXPECT_FALSE(probe(gif).ok());
}

TEST(DecodeTest, MaxBytesIsCheckedFirst) {
  std::vector<std::uint8_t> big(100, 0);
  DecodeOptions o;
  o.max_bytes = 10;
  auto r = decode_rgb(big, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
}

TEST(BFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(to_bfloat16(-2.0f), 0xC000);
  // 1 + 2^-8 is halfway between two bfloat16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(to_bfloat16(1.00390625f), 0x3F80);
  EXPECT_EQ(to_bfloat16(1.01171875f), 0x3F82);  // 1 + 3 * 2^-8: halfway, up to even
}

}  // namespace
}  // namespace mmfeed::vision
