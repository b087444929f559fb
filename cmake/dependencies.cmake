# Every third-party library comes from a Debian package; nothing is vendored or downloaded.
# Each is exposed as an imported target named mmfeed::dep::<name>.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

function(mmfeed_pkg_dep name module)
  pkg_check_modules(MMFEED_DEP_${name} REQUIRED IMPORTED_TARGET GLOBAL ${module})
  add_library(mmfeed::dep::${name} ALIAS PkgConfig::MMFEED_DEP_${name})
endfunction()

mmfeed_pkg_dep(curl libcurl)
mmfeed_pkg_dep(openssl libcrypto)
mmfeed_pkg_dep(turbojpeg libturbojpeg)
mmfeed_pkg_dep(jpeg libjpeg)
mmfeed_pkg_dep(spng spng)
mmfeed_pkg_dep(webp "libwebp;libwebpdemux")
mmfeed_pkg_dep(simdjson simdjson)
mmfeed_pkg_dep(pcre2 libpcre2-8)
mmfeed_pkg_dep(utf8proc libutf8proc)
mmfeed_pkg_dep(hwy libhwy)
mmfeed_pkg_dep(expat expat)
mmfeed_pkg_dep(zlib zlib)
mmfeed_pkg_dep(zstd libzstd)
mmfeed_pkg_dep(tomlplusplus tomlplusplus)
mmfeed_pkg_dep(yamlcpp yaml-cpp)
# Videos (src/vision/video.*): FFmpeg's libraries. MMFEED_VIDEO=OFF builds without them (the GPU
# bundle does, to stay small); videos are then refused by name.
if(MMFEED_VIDEO)
  mmfeed_pkg_dep(av "libavformat;libavcodec;libswscale;libavutil")
endif()

if(MMFEED_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MMFEED_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
