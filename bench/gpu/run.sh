#!/usr/bin/env bash
# The real-GPU benchmark, on an NVIDIA machine that has PyTorch but neither network nor apt:
# gets mmfeed there (the prebuilt .gpu-bundle, or a build), then runs the parts asked for, each
# from local files with every system on all the cores the machine gives (mmfeed bench's --workers
# default), each bounded so that a hang still leaves the report of the runs done:
#   check         the GPU path of the package (bench/gpu/check_device.py: is_pinned in both
#                 orders, device batches equal to host ones, the exit sequence exits 0; 120 s)
#   model         `mmfeed bench --quick` with bench/bench_model.py's Qwen-VL-shaped trainer on the
#                 GPU: utilisation, NVML's GPU busy share, the step (${OUT:-.}/gpu-bench.json; 210 s)
#   scaling       `mmfeed bench --scaling --quick`: step-0 samples/s by workers 1, 2, 4, ... up to
#                 the cores, mmfeed's single-threaded share (${OUT:-.}/gpu-scaling.json; 150 s)
#   cores-needed  `mmfeed bench --cores-needed --quick` at the talk's demand ratio
#                 (${OUT:-.}/gpu-cores-needed.json; 210 s)
# Run from the repository root: bench/gpu/run.sh [PART...]   (default: check model scaling, at
# most 8 minutes with the bounds above). Everything it prints is also kept in
# ${OUT:-.}/gpu-run.log, from which the GPU figures of docs/ are copied.
# Exit status: 2 when Python packages or build tools are missing or a part is unknown, 3 when C++
# libraries are, else that of the first part that failed (124 if it ran past its bound).
set -euo pipefail

mkdir -p "${OUT:-.}"
exec > >(tee -a "${OUT:-.}/gpu-run.log") 2>&1
python=${PYTHON:-python3}
parts=("$@")
((${#parts[@]})) || parts=(check model scaling)
for part in "${parts[@]}"; do
  case $part in check | model | scaling | cores-needed) ;; *)
    echo "bench/gpu: unknown part $part: choose from check, model, scaling, cores-needed" >&2
    exit 2
  esac
done

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

# The Python peers this machine has; SPDL's only where it is installed.
systems=naive,torch-dataloader,mmfeed-serial,mmfeed
if "$python" -c 'import spdl.pipeline' 2>/dev/null; then
  systems=naive,torch-dataloader,spdl,mmfeed-serial,mmfeed
fi
out=${OUT:-.}
data=$(mktemp -d)/data  # the demo set, generated once for every part, outside what comes back from $OUT
status=0
for part in "${parts[@]}"; do
  # A failing part still lets the others run (device time is scarce); the exit status keeps it.
  code=0
  case $part in
    check)  # the GPU half of the package's tests: pinned batch memory, device="cuda:0" equal to the host
      timeout 120 "$python" bench/gpu/check_device.py || code=$? ;;
    model)  # local files: the object store needs nginx, which that machine lacks
      timeout 210 "$python" bench/pipeline.py --quick --sources local --systems "$systems" --trainer model \
        --device cuda --data "$data" --out "$out/gpu-bench" --json "$out/gpu-bench.json" || code=$? ;;
    scaling)
      timeout 150 "$python" bench/pipeline.py --scaling --quick --sources local --data "$data" \
        --out "$out/gpu-scaling" --json "$out/gpu-scaling.json" || code=$? ;;
    cores-needed)
      timeout 210 "$python" bench/pipeline.py --cores-needed --quick --sources local --data "$data" \
        --out "$out/gpu-cores-needed" --json "$out/gpu-cores-needed.json" || code=$? ;;
  esac
  if ((code)); then
    echo "bench/gpu: $part failed (exit $code)" >&2
    ((status)) || status=$code
  fi
done
exit "$status"
