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
# Audio (src/audio): libsoxr resamples as librosa (python-soxr) does, FFTW transforms.
mmfeed_pkg_dep(soxr soxr)
mmfeed_pkg_dep(fftw fftw3)
# Videos and audio files (src/media, src/vision/video.*, src/audio/decode.*): FFmpeg's libraries.
# MMFEED_VIDEO=OFF builds without them (the GPU bundle does, to stay small); videos and audio
# files are then refused by name (audio given as samples still works).
if(MMFEED_VIDEO)
  mmfeed_pkg_dep(av "libavformat;libavcodec;libswscale;libavutil")
endif()

# Parquet sources (src/dataset/parquet.*): Apache Arrow's Parquet C++ reader. No Debian package
# carries it; the pyarrow wheel (requirements.txt) ships its libraries and headers, found through
# the interpreter that builds (the venv's: `make build`), or MMFEED_PYARROW_DIR. MMFEED_PARQUET=OFF
# builds without them (the GPU bundle does: they would not fit its carry); .parquet sources are
# then refused by name.
if(MMFEED_PARQUET)
  if(NOT MMFEED_PYARROW_DIR)
    # The build's interpreter (pip install sets it), else the venv's (the sanitizer and fuzz trees).
    if(Python_EXECUTABLE)
      set(_mmfeed_py "${Python_EXECUTABLE}")
    else()
      find_program(MMFEED_VENV_PYTHON NAMES python3 PATHS "${PROJECT_SOURCE_DIR}/.venv/bin" NO_DEFAULT_PATH)
      if(NOT MMFEED_VENV_PYTHON)
        find_program(MMFEED_VENV_PYTHON NAMES python3)
      endif()
      set(_mmfeed_py "${MMFEED_VENV_PYTHON}")
    endif()
    execute_process(COMMAND "${_mmfeed_py}" -c "import os, pyarrow; print(os.path.dirname(pyarrow.__file__), end='')"
                    OUTPUT_VARIABLE _mmfeed_pyarrow RESULT_VARIABLE _mmfeed_rc ERROR_QUIET)
    if(NOT _mmfeed_rc EQUAL 0)
      message(FATAL_ERROR "MMFEED_PARQUET: ${_mmfeed_py} cannot import pyarrow (make setup installs it; "
                          "or set MMFEED_PYARROW_DIR, or build with -DMMFEED_PARQUET=OFF)")
    endif()
    set(MMFEED_PYARROW_DIR "${_mmfeed_pyarrow}" CACHE PATH "The pyarrow package directory (its include/ and libraries)")
  endif()
  file(GLOB _mmfeed_arrow "${MMFEED_PYARROW_DIR}/libarrow.so.[0-9]*")
  file(GLOB _mmfeed_parquet "${MMFEED_PYARROW_DIR}/libparquet.so.[0-9]*")
  if(NOT _mmfeed_arrow OR NOT _mmfeed_parquet OR NOT EXISTS "${MMFEED_PYARROW_DIR}/include/parquet/api/reader.h")
    message(FATAL_ERROR "MMFEED_PARQUET: ${MMFEED_PYARROW_DIR} holds no libarrow/libparquet and their headers")
  endif()
  list(GET _mmfeed_arrow 0 _mmfeed_arrow)
  list(GET _mmfeed_parquet 0 _mmfeed_parquet)
  add_library(mmfeed_dep_parquet INTERFACE)
  target_include_directories(mmfeed_dep_parquet SYSTEM INTERFACE "${MMFEED_PYARROW_DIR}/include")
  # The wheel's libraries are linked by their full paths, so CMake records their directory in the
  # run path of every binary of the build tree; installing replaces it with a path relative to
  # the installed binary (python/CMakeLists.txt, tools/CMakeLists.txt), since an isolated
  # `pip install` builds against a pyarrow in a temporary directory it deletes afterwards.
  # libparquet carries its own OpenSSL and simdjson, their symbols exported: the
  # system's libcrypto and libsimdjson come before it in every binary's library order, or calls
  # to them (ours, and libssl's and libcrypto's own) bind to those copies (Python's hashlib
  # crashed on import after mmfeed's module; our JSON ran on Arrow's simdjson).
  # tests/python/data/test_parquet.py checks every binding. One flag, so that neither the linker
  # (--as-needed) nor CMake (which moves repeated libraries) drops or reorders them.
  target_link_libraries(mmfeed_dep_parquet INTERFACE "-Wl,--push-state,--no-as-needed,-lcrypto,-lsimdjson,--pop-state"
                        "${_mmfeed_parquet}" "${_mmfeed_arrow}")
  add_library(mmfeed::dep::parquet ALIAS mmfeed_dep_parquet)
endif()

if(MMFEED_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MMFEED_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
