#!/usr/bin/env bash
# The real-GPU benchmark: builds mmfeed on an NVIDIA machine that has PyTorch but neither network
# nor apt, checks the GPU path of the package (bench/gpu/check_device.py), then runs
# `mmfeed.bench --quick` with bench_model's Qwen-VL-shaped trainer on the GPU.
# Run from the repository root: bench/gpu/run.sh   (writes ${OUT:-.}/gpu-bench.json)
# Exit status: 2 when Python packages or build tools are missing, 3 when C++ libraries are, else
# the benchmark's (124 if it ran past 420 s).
set -euo pipefail

python=${PYTHON:-python3}

# Which GPU this is, for the record.
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L
fi

# Without network pip cannot fetch the build backend or the runtime: all must be installed already.
missing_tools=()
for module in scikit_build_core nanobind torch numpy PIL; do
  "$python" -c "import $module" 2>/dev/null || missing_tools+=("python module $module")
done
for tool in cmake ninja; do  # a pip-installed cmake or ninja counts too
  command -v "$tool" >/dev/null || "$python" -c "import $tool" 2>/dev/null || missing_tools+=("$tool")
done
for tool in pkg-config c++; do
  command -v "$tool" >/dev/null || missing_tools+=("$tool")
done

# The C++ libraries cmake/dependencies.cmake asks pkg-config for, as module:Debian package.
libraries=(libcurl:libcurl4-openssl-dev libcrypto:libssl-dev libturbojpeg:libturbojpeg0-dev libjpeg:libjpeg62-turbo-dev spng:libspng-dev
  libwebp:libwebp-dev libwebpdemux:libwebp-dev simdjson:libsimdjson-dev libpcre2-8:libpcre2-dev
  libutf8proc:libutf8proc-dev libhwy:libhwy-dev expat:libexpat1-dev zlib:zlib1g-dev libzstd:libzstd-dev
  tomlplusplus:libtomlplusplus-dev)
missing_libs=()
if command -v pkg-config >/dev/null; then
  for library in "${libraries[@]}"; do
    pkg-config --exists "${library%%:*}" || missing_libs+=("${library%%:*} (${library#*:})")
  done
fi

if ((${#missing_tools[@]})); then
  echo "bench/gpu: missing build tools or Python packages: ${missing_tools[*]}" >&2
fi
if ((${#missing_libs[@]})); then
  echo "bench/gpu: missing C++ libraries (pkg-config module, Debian package): ${missing_libs[*]}" >&2
  echo "bench/gpu: this machine cannot build mmfeed; use an image with these -dev packages" >&2
  exit 3
fi
if ((${#missing_tools[@]})); then
  exit 2
fi

# Build and install mmfeed (library, CLI, extension) from this tree, offline, in its own build dir.
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip install -q \
  --disable-pip-version-check --no-index --no-build-isolation --no-deps -C build-dir=build-gpu .

# The GPU half of the package's tests: pinned batch memory, device="cuda:0" equal to the host.
timeout 120 "$python" bench/gpu/check_device.py

# The benchmark itself, bounded so that a hang still leaves time to read what it wrote.
timeout 420 "$python" -m mmfeed.bench --quick --trainer model --device cuda --json "${OUT:-.}/gpu-bench.json"
