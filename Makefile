# The two commands a newcomer types: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
SCENARIO ?= scenarios/llm_decode.lua
# A ctest entry that runs longer fails with its name and time (entries may set their own).
TEST_SECONDS ?= 900

.PHONY: all deps configure build run test test-sanitize fuzz test-gpu bench clean

all: build

deps:
	@bash scripts/install_deps.sh

# The CUDA backend, its GPU tests and benchmarks are compiled where a GPU is visible (nvidia-smi
# lists one); CUDA=ON compiles them anyway (a compile check, or a build for another machine),
# CUDA=OFF never. Read once, when $(BUILD) is first configured.
CUDA ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo ON || echo OFF)

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release \
	  -DPERFSIM_CUDA=$(CUDA)

# Everything: perfsim, the tests and the benchmarks.
build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Builds perfsim alone, then runs the main scenario on the best available backend (CUDA when a
# GPU is present, else CPU).
run: configure
	@cmake --build $(BUILD) -j $(JOBS) --target perfsim
	./$(BUILD)/perfsim run $(SCENARIO)

# Builds what the tests run (not the benchmarks), then every test: doctest units, CLI golden
# tests, charts, MPI ranks (GPU tests where a GPU is present). A test that hangs fails with its
# name and time (each has a ctest TIMEOUT).
test: configure
	@cmake --build $(BUILD) -j $(JOBS) --target perfsim_test_targets
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout $(TEST_SECONDS)

# The unit and CLI tests under AddressSanitizer and UndefinedBehaviorSanitizer (CPU only, clang,
# in build-sanitize; any finding fails the run), with the libFuzzer targets built and their
# seeds replayed. `make fuzz` then fuzzes each input reader for FUZZ_SECONDS.
SANITIZE_FLAGS := -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_SECONDS ?= 60
test-sanitize: deps
	@test -f build-sanitize/CMakeCache.txt || cmake -S . -B build-sanitize $(GENERATOR) \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPERFSIM_CUDA=OFF -DPERFSIM_BENCH=OFF -DPERFSIM_FUZZ=ON \
	  "-DCMAKE_CXX_FLAGS=$(SANITIZE_FLAGS)" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
	@cmake --build build-sanitize -j $(JOBS) --target perfsim_test_targets
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-sanitize --output-on-failure -j $(JOBS) -LE gpu --timeout $(TEST_SECONDS)

fuzz: test-sanitize
	bash scripts/fuzz.sh build-sanitize $(FUZZ_SECONDS)

# On a GPU machine: build, ctest (unit + cli + gpu), compute-sanitizer memcheck of the GPU
# tests and the GPU benchmarks, with a summary table (scripts/gpu_check.sh; logs in
# build-gpu-logs). Fails with a clear message when no GPU is visible.
test-gpu:
	@BUILD=$(BUILD) JOBS=$(JOBS) bash scripts/gpu_check.sh

bench: build
	./$(BUILD)/bench/perfsim_bench
	./$(BUILD)/bench/perfsim_bench_search
	./$(BUILD)/bench/perfsim_bench_serve

clean:
	rm -rf $(BUILD)
