# The two commands a fresh machine needs: `make demo` and `make test`. Both set up first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
JOBS ?= $(shell nproc)
DEMO_DIR ?= demo-data
DEMO_SAMPLES ?= 64

.PHONY: setup build test test-cpp test-python test-tsan demo bench clean

setup:
	@bash scripts/setup.sh

# One CMake build tree (build/) for the library, CLI, tests, benchmarks and the Python
# extension; pip installs the package and the CLI into .venv from it.
build: setup
	@CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install -q --disable-pip-version-check \
	  --no-build-isolation --no-deps -C build-dir=build \
	  -C cmake.define.MMFEED_BUILD_TESTS=ON -C cmake.define.MMFEED_BUILD_BENCH=ON . \
	  2> >(grep -v '^WARNING: Location' >&2)
	@echo "built: build/mmfeed, build/core_test, build/core_bench; mmfeed installed in $(VENV)"

test: build test-cpp test-python

test-cpp:
	cd build && ctest --output-on-failure -j $(JOBS)

test-python:
	$(PY) -m pytest -q tests/python

# The core runtime's and the fetch engine's tests under ThreadSanitizer, in a separate build tree.
test-tsan: setup
	cmake -S . -B build-tsan -G Ninja -DMMFEED_SANITIZE=thread -DMMFEED_BUILD_PYTHON=OFF \
	  -DMMFEED_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-tsan -j $(JOBS) --target core_test storage_test
	TSAN_OPTIONS=halt_on_error=1 build-tsan/core_test
	TSAN_OPTIONS=halt_on_error=1 build-tsan/storage_test --gtest_filter='FetcherTest.*'

demo: build
	build/mmfeed make-dataset --out $(DEMO_DIR) --samples $(DEMO_SAMPLES) --seed 0

bench: build
	build/core_bench
	$(PY) bench/fetch.py
	$(PY) bench/vision.py

clean:
	rm -rf build build-tsan $(DEMO_DIR)
