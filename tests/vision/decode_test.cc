#include "vision/decode.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vision/patchify.h"

namespace mmfeed::vision {
namespace {

std::vector<std::uint8_t> tiff_with_orientation(bool little, std::uint16_t value) {
  std::vector<std::uint8_t> t = little ? std::vector<std::uint8_t>{'I', 'I', 42, 0, 8, 0, 0, 0}
                                       : std::vector<std::uint8_t>{'M', 'M', 0, 42, 0, 0, 0, 8};
  auto put16 = [&](std::uint16_t v) {
    if (little) {
      t.push_back(static_cast<std::uint8_t>(v & 0xFF)), t.push_back(static_cast<std::uint8_t>(v >> 8));
    } else {
      t.push_back(static_cast<std::uint8_t>(v >> 8)), t.push_back(static_cast<std::uint8_t>(v & 0xFF));
    }
  };
  put16(2);                                                         // two entries
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

std::vector<std::uint8_t> bytes(std::string_view s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

TEST(DecodeTest, EmptyInputIsCorrupt) {
  auto r = decode_rgb({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCorruptData);
  EXPECT_EQ(r.error().message(), "empty image (0 bytes)");
  EXPECT_EQ(probe({}).error().message(), "empty image (0 bytes)");
}

// Issue 15: these were all "unknown signature"; the message now names the format found.
TEST(DecodeTest, RecognisedFormatsItDoesNotDecodeAreNamed) {
  using namespace std::string_view_literals;
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"GIF87a\x01\x00\x01\x00\x80\x00\x00"sv, "GIF image"},
      {"GIF89a\x01\x00\x01\x00\x80\x00\x00"sv, "GIF image"},
      {"II*\x00\x08\x00\x00\x00\x0e\x00\x00\x01"sv, "TIFF image (little-endian)"},
      {"MM\x00*\x00\x00\x00\x08\x00\x0e\x01\x00"sv, "TIFF image (big-endian)"},
      // File header (size 58, pixels at 54), then a 40-byte BITMAPINFOHEADER.
      {"BM\x3a\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00\x28\x00\x00\x00\x01\x00\x00\x00"sv, "BMP image"},
      {"\x00\x00\x00\x18"
       "ftypheic\x00\x00\x00\x00"
       "mif1heic"sv,
       "HEIC image"},
      {"\x00\x00\x00\x1c"
       "ftypavif\x00\x00\x00\x00"
       "avifmif1miaf"sv,
       "AVIF image"},
      {"\x00\x00\x00\x18"
       "ftypmif1\x00\x00\x00\x00"
       "mif1miaf"sv,
       "HEIF image"},
      {"\x00\x00\x00\x18"
       "ftypmif1\x00\x00\x00\x00"
       "mif1avif"sv,
       "AVIF image"},  // AVIF by a compatible brand
      {"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\"/>"sv, "SVG image"},
      {"\xef\xbb\xbf<?xml version=\"1.0\"?>\n<!-- drawn by hand -->\n"
       "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
       "<svg xmlns=\"http://www.w3.org/2000/svg\">"sv,
       "SVG image"},
      // One 16x16 32-bit entry of 1128 bytes at offset 22.
      {"\x00\x00\x01\x00\x01\x00\x10\x10\x00\x00\x01\x00\x20\x00\x68\x04\x00\x00\x16\x00\x00\x00"sv, "ICO image"},
      {"\xff\x0a\xfa\x1f\x42\x08\x44\x01"sv, "JPEG XL image"},  // bare codestream
      {"\x00\x00\x00\x0cJXL \x0d\x0a\x87\x0a\x00\x00\x00\x14"
       "ftypjxl "sv,
       "JPEG XL image"},  // container
      {"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n"sv, "PDF document"},
  };
  for (const auto& [data, name] : cases) {
    const std::string want =
        std::string(name) + ": format not supported (mmfeed decodes JPEG, PNG and WebP); convert it to one of those";
    auto decoded = decode_rgb(bytes(data));
    ASSERT_FALSE(decoded.ok()) << name;
    EXPECT_EQ(decoded.error().code(), ErrorCode::kUnsupported) << name;
    EXPECT_EQ(decoded.error().message(), want);
    auto probed = probe(bytes(data));
    ASSERT_FALSE(probed.ok()) << name;
    EXPECT_EQ(probed.error().code(), ErrorCode::kUnsupported) << name;
    EXPECT_EQ(probed.error().message(), want);
  }
}

// Issue 31: the first 16 bytes were echoed in the reason, which showed a secret file's first
// bytes to whoever reads the errors; the reason names the size only.
TEST(DecodeTest, UnknownDataIsCorruptAndNeverShowsItsBytes) {
  using namespace std::string_view_literals;
  const std::string_view cases[] = {
      "<!DOCTYPE html>\n<html><body>Not Found</body></html>"sv,
      // An S3 error document is XML, but not SVG.
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code></Error>"sv,
      // ISO-BMFF of a video brand is not an image format.
      "\x00\x00\x00\x18"
      "ftypisom\x00\x00\x02\x00"
      "isomiso2"sv,
      "BMW"sv,               // "BM" without a BMP header after it
      "\x00\x00\x01\x00"sv,  // ICO's first bytes, no directory
      "SECRET_TOKEN=abc123"sv,
  };
  for (const std::string_view data : cases) {
    const std::string want =
        "not a JPEG, PNG or WebP image: unrecognised signature (" + std::to_string(data.size()) + " bytes)";
    auto decoded = decode_rgb(bytes(data));
    ASSERT_FALSE(decoded.ok()) << data;
    EXPECT_EQ(decoded.error().code(), ErrorCode::kCorruptData) << data;
    EXPECT_EQ(decoded.error().message(), want);
    auto probed = probe(bytes(data));
    ASSERT_FALSE(probed.ok()) << data;
    EXPECT_EQ(probed.error().message(), want);
  }
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
