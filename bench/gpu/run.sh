#!/usr/bin/env bash
# The real-GPU benchmark, on an NVIDIA machine that has PyTorch but neither network nor apt:
# gets mmfeed there (the prebuilt .gpu-bundle, or a build), checks the GPU path of the package
# (bench/gpu/check_device.py), then runs `mmfeed bench --quick` (bench/pipeline.py) from local
# files with bench/bench_model.py's Qwen-VL-shaped trainer on the GPU.
# Run from the repository root: bench/gpu/run.sh   (writes ${OUT:-.}/gpu-bench.json)
# Exit status: 2 when Python packages or build tools are missing, 3 when C++ libraries are, else
# the benchmark's (124 if it ran past 420 s), else check_device.py's.
set -euo pipefail

python=${PYTHON:-python3}

# Which GPU this is, for the record.
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L || true
fi

# Two ways to get mmfeed there. With .gpu-bundle/ (bench/gpu/bundle.sh, run where the -dev
# packages are, then carried) for this Python: its prebuilt module beside this checkout's Python
# sources, its libraries on LD_LIBRARY_PATH; nothing is compiled. Otherwise build from this tree,
# offline, which needs the build tools and the C++ libraries' -dev packages.
tag=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
if [[ -f .gpu-bundle/_mmfeed$tag ]]; then
  echo "bench/gpu: using the prebuilt module in .gpu-bundle (built from $(head -1 .gpu-bundle/COMMIT))"
  site=$(mktemp -d)
  cp -r python/mmfeed "$site/"
  cp ".gpu-bundle/_mmfeed$tag" "$site/mmfeed/"
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  export LD_LIBRARY_PATH=$PWD/.gpu-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  "$python" -c 'import mmfeed; print("bench/gpu: mmfeed", mmfeed.__version__, "-", mmfeed.cuda_runtime())'
else
  missing_tools=()
  for module in scikit_build_core nanobind torch numpy PIL; do
    "$python" -c "import $module" 2>/dev/null || missing_tools+=("python module $module")
  done
  "$python" -c 'import os, sysconfig; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' \
    2>/dev/null || missing_tools+=("Python.h (the Python development headers)")
  for tool in cmake ninja; do  # a pip-installed cmake or ninja counts too
    command -v "$tool" >/dev/null || "$python" -c "import $tool" 2>/dev/null || missing_tools+=("$tool")
  done
  for tool in pkg-config c++; do
    command -v "$tool" >/dev/null || missing_tools+=("$tool")
  done

  # The C++ libraries cmake/dependencies.cmake asks pkg-config for, as module:Debian package.
  libraries=(libcurl:libcurl4-openssl-dev libcrypto:libssl-dev libturbojpeg:libturbojpeg0-dev libjpeg:libjpeg62-turbo-dev
    spng:libspng-dev libwebp:libwebp-dev libwebpdemux:libwebp-dev simdjson:libsimdjson-dev libpcre2-8:libpcre2-dev
    libutf8proc:libutf8proc-dev libhwy:libhwy-dev expat:libexpat1-dev zlib:zlib1g-dev libzstd:libzstd-dev
    tomlplusplus:libtomlplusplus-dev)
  missing_libs=()
  for library in "${libraries[@]}"; do
    if ! command -v pkg-config >/dev/null || ! pkg-config --exists "${library%%:*}"; then
      missing_libs+=("${library%%:*} (${library#*:})")
    fi
  done

  if ((${#missing_tools[@]})); then
    echo "bench/gpu: missing build tools or Python packages: ${missing_tools[*]}" >&2
  fi
  if ((${#missing_libs[@]})); then
    echo "bench/gpu: missing C++ libraries (pkg-config module, Debian package): ${missing_libs[*]}" >&2
    echo "bench/gpu: this machine cannot build mmfeed; run bench/gpu/bundle.sh where it can and carry .gpu-bundle" >&2
    exit 3
  fi
  if ((${#missing_tools[@]})); then
    exit 2
  fi
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip install -q \
    --disable-pip-version-check --no-index --no-build-isolation --no-deps -C build-dir=build-gpu .
fi

# The GPU half of the package's tests: pinned batch memory, device="cuda:0" equal to the host.
# A failure here still lets the benchmark run (device time is scarce); the exit status keeps it.
checked=0
timeout 120 "$python" bench/gpu/check_device.py || checked=$?

# The benchmark itself, from local files (the object store needs nginx, which that machine lacks),
# with the Python peers it has; bounded so that a hang still leaves the report of the runs done.
systems=naive,torch-dataloader,mmfeed-serial,mmfeed
if "$python" -c 'import spdl.pipeline' 2>/dev/null; then
  systems=naive,torch-dataloader,spdl,mmfeed-serial,mmfeed
fi
timeout 420 "$python" bench/pipeline.py --quick --sources local --systems "$systems" --trainer model --device cuda \
  --out "${OUT:-.}/gpu-bench" --json "${OUT:-.}/gpu-bench.json"
if ((checked)); then
  echo "bench/gpu: check_device.py failed (exit $checked)" >&2
  exit "$checked"
fi
