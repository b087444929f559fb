#!/usr/bin/env bash
# Prepares, on this x86-64 machine, what bench/gpu/run.sh needs on a GPU machine that can
# neither build mmfeed (no -dev packages, no apt, no network) nor install anything: the native
# module built for that machine's Python (3.12 by default: the device image's), and the shared
# libraries it links to beyond the C library and the C++ runtime (which that machine has, newer).
# Built without video and Parquet (MMFEED_VIDEO=OFF, MMFEED_PARQUET=OFF): FFmpeg's and Arrow's libraries
# would not fit the carry.
# Writes .gpu-bundle/ (ignored by git; name it in the device call's carry):
#   _mmfeed.cpython-3XX-x86_64-linux-gnu.so, lib/*.so.*, COMMIT (the tree it was built from)
# run.sh puts the module beside the checkout's python/mmfeed sources and lib/ on LD_LIBRARY_PATH.
# Run from the repository root:   bench/gpu/bundle.sh [path/to/python3.12]
set -euo pipefail

python=${1:-python3.12}
bundle=.gpu-bundle
venv=build-gpu-venv   # build-*/ is ignored
pin() { grep -E "^$1==" requirements.txt; }

"$python" -c 'import sys; assert sys.version_info >= (3, 10)' || { echo "bundle: $python is not a Python >= 3.10" >&2; exit 2; }
if [[ ! -x $venv/bin/python ]]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$(pin nanobind)" "$(pin scikit-build-core)" \
  "$(pin cmake)" "$(pin ninja)" 2> >(grep -v '^WARNING: Location' >&2)

rm -rf "$bundle" build-gpu-bundle-site
mkdir -p "$bundle/lib"
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
  --no-build-isolation --target build-gpu-bundle-site -C build-dir=build-gpu-bundle \
  -C cmake.define.MMFEED_VIDEO=OFF -C cmake.define.MMFEED_PARQUET=OFF . \
  2> >(grep -v '^WARNING: Location' >&2)
cp build-gpu-bundle-site/mmfeed/_mmfeed.*.so "$bundle/"
rm -rf build-gpu-bundle-site
module=$(ls "$bundle"/_mmfeed.*.so)

# The libraries the module loads, less those of the C library and the C++ runtime.
ldd "$module" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
  case $(basename "$lib") in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux* | libstdc++.so.* | libgcc_s.so.*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
{ git rev-parse HEAD; git status --porcelain -- src include python/bindings cmake CMakeLists.txt | sed 's/^/modified: /'; } \
  > "$bundle/COMMIT"
echo "bundle: $(basename "$module"), $(ls "$bundle/lib" | wc -l) libraries, $(du -sh "$bundle" | cut -f1) in $bundle/"
