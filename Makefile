# The two commands a fresh machine needs: `make demo` and `make test`. Both set up first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
JOBS ?= $(shell nproc)
DEMO_DIR ?= demo-data
DEMO_SAMPLES ?= 128
DEMO_VIDEOS ?= 8
DEMO_MODEL ?= qwen2-vl

.PHONY: setup build docs stubs format lint test test-oracles test-sanitizers test-cpp test-python test-tsan test-asan test-ubsan fuzz demo bench bench-torchvision clean

setup:
	@bash scripts/setup.sh

# One CMake build tree (build/) for the library, CLI, tests, benchmarks and the Python
# extension; pip installs the package and the CLI into .venv from it. MMFEED_WERROR=1 in the
# environment makes warnings in our code errors (`MMFEED_WERROR=1 make test`); it is passed on
# every build, ON or OFF, so that build/'s CMake cache does not keep an earlier run's choice.
WERROR := $(if $(filter 1,$(MMFEED_WERROR)),ON,OFF)
build: setup
	@CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY) -m pip install -q --disable-pip-version-check \
	  --no-build-isolation --no-deps -C build-dir=build \
	  -C cmake.define.MMFEED_BUILD_TESTS=ON -C cmake.define.MMFEED_BUILD_BENCH=ON \
	  -C cmake.define.MMFEED_WERROR=$(WERROR) . \
	  2> >(grep -v '^WARNING: Location' >&2)
	@echo "built: build/mmfeed, build/core_test, build/core_bench, build/vision_bench, build/audio_bench; mmfeed installed in $(VENV)"

# docs/options.md from the option table (tests/python/tools/test_docs.py fails when it is stale).
docs: build
	$(PY) scripts/options_doc.py

# The house style: clang-format (.clang-format) on the C++, ruff (pyproject.toml) on the Python.
# `make format` applies both; `make lint` (in CI) fails on a file either would change or a ruff finding.
CXX_SOURCES = $(shell git ls-files '*.cc' '*.h' ':!tests/data')
format: setup
	clang-format-14 -i --style=file $(CXX_SOURCES)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

lint: setup
	clang-format-14 --dry-run -Werror --style=file $(CXX_SOURCES)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The native module's type stub, committed (python/mmfeed/_mmfeed.pyi) from the one the build
# generates; tests/python/tools/test_docs.py fails when they differ.
stubs: build
	cp build/python/_mmfeed.pyi python/mmfeed/_mmfeed.pyi

test: build test-oracles test-cpp test-python

# The torchvision environment the video processor's oracle runs in (scripts/setup.sh).
test-oracles:
	@MMFEED_TORCHVISION=1 bash scripts/setup.sh

test-cpp:
	cd build && ctest --output-on-failure -j $(JOBS)

# The suite's files shared between PYTEST_WORKERS processes (pytest-xdist), each file's tests in
# one (its module fixtures built once); the slowest tests named at the end.
PYTEST_WORKERS ?= 2
test-python:
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=15 tests/python

# The core runtime's, storage's (fetch engine, HTTP fetches against nginx included), loader's and
# copy stage's (against the test CUDA runtime) tests under ThreadSanitizer, in a separate build tree.
test-tsan: setup
	cmake -S . -B build-tsan -G Ninja -DMMFEED_SANITIZE=thread -DMMFEED_BUILD_PYTHON=OFF \
	  -DMMFEED_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-tsan -j $(JOBS) --target core_test storage_test pipeline_test device_copy_test
	TSAN_OPTIONS=halt_on_error=1 build-tsan/core_test
	TSAN_OPTIONS=halt_on_error=1 build-tsan/storage_test
	TSAN_OPTIONS=halt_on_error=1 build-tsan/pipeline_test
	TSAN_OPTIONS=halt_on_error=1 MMFEED_CUDART=$(CURDIR)/build-tsan/libmmfeed_test_cudart.so build-tsan/device_copy_test

# The C++ suites under AddressSanitizer (leaks included), in a separate build tree.
test-asan: setup
	cmake -S . -B build-asan -G Ninja -DMMFEED_SANITIZE=address -DMMFEED_BUILD_PYTHON=OFF \
	  -DMMFEED_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

# The C++ suites under UndefinedBehaviorSanitizer, in a separate build tree; the first finding
# fails the test (-fno-sanitize-recover=undefined).
test-ubsan: setup
	cmake -S . -B build-ubsan -G Ninja -DMMFEED_SANITIZE=undefined -DMMFEED_BUILD_PYTHON=OFF \
	  -DMMFEED_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-ubsan -j $(JOBS)
	cd build-ubsan && UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# Every C++ suite under AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer at once,
# in build-sanitize/: what CI runs beside `make test` (the three separate targets above remain).
test-sanitizers: setup
	cmake -S . -B build-sanitize -G Ninja -DMMFEED_SANITIZE=address,undefined -DMMFEED_BUILD_PYTHON=OFF \
	  -DMMFEED_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-sanitize -j $(JOBS)
	cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# libFuzzer targets (fuzz/) built with clang, each run FUZZ_SECONDS from the committed corpus;
# new inputs go to build-fuzz/corpus/<target>, crashes to build-fuzz/crash-*.
FUZZ_SECONDS ?= 60
fuzz: setup
	@MMFEED_FUZZ=1 bash scripts/setup.sh
	CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DMMFEED_BUILD_FUZZ=ON \
	  -DMMFEED_BUILD_TESTS=OFF -DMMFEED_BUILD_BENCH=OFF -DMMFEED_BUILD_PYTHON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-fuzz -j $(JOBS)
	@for t in decode uri s3_xml chat video audio manifest shards energon_split parquet; do \
	  mkdir -p build-fuzz/corpus/$$t && cp -n tests/data/corpus/$$t/* build-fuzz/corpus/$$t/ 2>/dev/null; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
	  (cd build-fuzz && ./$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -print_final_stats=1 \
	    corpus/$$t > fuzz-$$t.log 2>&1) || { tail -40 build-fuzz/fuzz-$$t.log; exit 1; }; \
	  tail -4 build-fuzz/fuzz-$$t.log; \
	done

# The main job on the demo data: write the data set (or reuse it), then feed a trainer from the
# object store with mmfeed and the Python pipelines side by side (`mmfeed bench --quick`), with
# the preprocessing of DEMO_MODEL (qwen2-vl, qwen2.5-vl or qwen3-vl: `make demo DEMO_MODEL=qwen3-vl`);
# the report, the utilisation plot and mmfeed's Perfetto trace go to $(DEMO_DIR)/bench/. Then the
# loader over the set's DEMO_VIDEOS video conversations (`mmfeed run`, its trace beside the bench's).
demo: build
	build/mmfeed make-dataset --out $(DEMO_DIR) --samples $(DEMO_SAMPLES) --seed 0 --videos $(DEMO_VIDEOS)
	build/mmfeed bench --quick --model $(DEMO_MODEL) --samples $(DEMO_SAMPLES) --data $(DEMO_DIR) --out $(DEMO_DIR)/bench
	build/mmfeed run --manifest $(DEMO_DIR)/videos.jsonl --tokenizer tests/data/qwen3-tokenizer/tokenizer.json \
	  --model $(DEMO_MODEL) --batch-size 2 --trace $(DEMO_DIR)/bench/videos-trace.json

bench: build test-oracles
	build/core_bench
	build/vision_bench
	build/audio_bench
	$(PY) bench/fetch.py
	$(PY) bench/vision.py
	$(PY) bench/video.py
	$(PY) bench/audio.py
	$(PY) bench/text.py
	$(PY) bench/scale.py
	$(PY) bench/balance.py
	build/mmfeed bench --out bench-results

# bench/vision.py with the HF torchvision backend's column, timed in the torchvision environment
# (.venv-tv, about 5.5 GB: torch 2.14.1 + torchvision 0.29.1; `make test` makes it too).
bench-torchvision: build test-oracles
	$(PY) bench/vision.py --torchvision-python .venv-tv/bin/python

clean:
	rm -rf build build-tsan build-asan build-ubsan build-fuzz $(DEMO_DIR) bench-results
