#include "mmfeed/build_info.h"

#include <curl/curl.h>
#include <expat.h>
#include <hwy/highway.h>
#include <hwy/targets.h>
#include <jconfig.h>
#include <openssl/crypto.h>
#include <simdjson.h>
#include <spng.h>
#include <utf8proc.h>
#include <webp/decode.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "vision/video.h"

namespace mmfeed {

#ifndef MMFEED_VERSION
#error "MMFEED_VERSION must be defined by the build"
#endif

std::string_view version() { return MMFEED_VERSION; }

namespace {

std::string dotted(unsigned major, unsigned minor, unsigned patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string highway_targets() {
  std::string out;
  for (std::int64_t targets = hwy::SupportedTargets(); targets != 0; targets &= targets - 1) {
    const std::int64_t target = targets & -targets;
    if (!out.empty()) out += ",";
    out += hwy::TargetName(target);
  }
  return "supported targets " + out;
}

std::string pcre2_version_and_jit() {
  char version[64] = {};
  pcre2_config(PCRE2_CONFIG_VERSION, version);
  std::uint32_t jit = 0;
  pcre2_config(PCRE2_CONFIG_JIT, &jit);
  std::string v(version);
  v = v.substr(0, v.find(' '));  // "10.42 2022-12-11": keep the number
  return v + (jit ? "|JIT available" : "|no JIT");
}

}  // namespace

std::vector<LibraryInfo> linked_libraries() {
  std::vector<LibraryInfo> libs;
  const curl_version_info_data* curl = curl_version_info(CURLVERSION_NOW);
  libs.push_back({"libcurl", curl->version, std::string("TLS ") + (curl->ssl_version ? curl->ssl_version : "none")});
  libs.push_back({"OpenSSL", OpenSSL_version(OPENSSL_VERSION_STRING), "HMAC-SHA256 for SigV4"});
  libs.push_back({"libjpeg-turbo",
                  dotted(LIBJPEG_TURBO_VERSION_NUMBER / 1000000, LIBJPEG_TURBO_VERSION_NUMBER / 1000 % 1000,
                         LIBJPEG_TURBO_VERSION_NUMBER % 1000),
                  "TurboJPEG API"});
  libs.push_back({"libspng", spng_version_string(), "PNG decode"});
  const int webp = WebPGetDecoderVersion();
  libs.push_back({"libwebp", dotted(webp >> 16 & 0xff, webp >> 8 & 0xff, webp & 0xff), "WebP decode"});
  libs.push_back(
      {"simdjson",
       dotted(simdjson::SIMDJSON_VERSION_MAJOR, simdjson::SIMDJSON_VERSION_MINOR, simdjson::SIMDJSON_VERSION_REVISION),
       "implementation " + std::string(simdjson::get_active_implementation()->name())});
  const std::string pcre2 = pcre2_version_and_jit();
  libs.push_back({"PCRE2", pcre2.substr(0, pcre2.find('|')), pcre2.substr(pcre2.find('|') + 1)});
  libs.push_back({"utf8proc", utf8proc_version(), "NFC normalisation"});
  libs.push_back({"Highway", dotted(HWY_MAJOR, HWY_MINOR, HWY_PATCH), highway_targets()});
  const XML_Expat_Version expat = XML_ExpatVersionInfo();
  libs.push_back({"expat", dotted(expat.major, expat.minor, expat.micro), "S3 XML responses"});
  if (vision::video_supported()) libs.push_back({"FFmpeg", vision::ffmpeg_version(), vision::video_libraries()});
  return libs;
}

}  // namespace mmfeed
