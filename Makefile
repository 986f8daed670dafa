# The two commands a newcomer types: `make run` and `make test`; `make install` puts perfsim on
# PATH (PREFIX, default ~/.local: bin/perfsim and share/perfsim).
BUILD ?= build
JOBS ?= $(shell nproc)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
SCENARIO ?= scenarios/llm_decode.lua
# A ctest entry that runs longer fails with its name and time (entries may set their own).
TEST_SECONDS ?= 900
PREFIX ?= $(HOME)/.local

.PHONY: all deps deps-run configure configure-run build run install test test-sanitize fuzz test-gpu bench clean

all: build

# Every package (tests, charts, MPI, clang); deps-run only what building perfsim needs.
deps:
	@bash scripts/install_deps.sh
deps-run:
	@bash scripts/install_deps.sh run

# The CUDA backend, its GPU tests and benchmarks are compiled where a GPU is visible (nvidia-smi
# lists one); CUDA=ON compiles them anyway (a compile check, or a build for another machine),
# CUDA=OFF never. Read once, when $(BUILD) is first configured.
CUDA ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo ON || echo OFF)

# A build folder configured before `make deps` installed MPI is configured again, so that the
# tests that run ranks find it.
CONFIGURE = test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release \
	  -DPERFSIM_CUDA=$(CUDA)
configure: deps
	@$(CONFIGURE)
	@! grep -q '^MPI_C_COMPILER:FILEPATH=.*NOTFOUND' $(BUILD)/CMakeCache.txt || ! command -v mpicc >/dev/null \
	  || cmake $(BUILD) >/dev/null
configure-run: deps-run
	@$(CONFIGURE)

# Everything: perfsim, the tests and the benchmarks.
build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Builds perfsim alone (no tests, benchmarks or CUDA without a GPU), then runs the main scenario
# on the best available backend (CUDA when a GPU is present, else CPU).
run: configure-run
	@cmake --build $(BUILD) -j $(JOBS) --target perfsim
	./$(BUILD)/perfsim run $(SCENARIO)

# perfsim into $(PREFIX)/bin, the scenarios, examples and stdlib into $(PREFIX)/share/perfsim
# (where the installed binary finds them from any directory).
install: configure-run
	@cmake --build $(BUILD) -j $(JOBS) --target perfsim
	@cmake --install $(BUILD) --prefix "$(PREFIX)"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) echo "perfsim: add $(PREFIX)/bin to PATH to type perfsim";; esac

# Builds what the tests run (not the benchmarks), then every test: doctest units, CLI golden
# tests, charts, MPI ranks (GPU tests where a GPU is present). A test that hangs fails with its
# name and time (each has a ctest TIMEOUT).
test: configure
	@cmake --build $(BUILD) -j $(JOBS) --target perfsim_test_targets
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout $(TEST_SECONDS)

# The unit and CLI tests under AddressSanitizer and UndefinedBehaviorSanitizer (CPU only, clang,
# in build-sanitize; any finding fails the run), with the libFuzzer targets built and their
# seeds replayed. `make fuzz` then fuzzes each input reader for FUZZ_SECONDS. The docs test
# (documented commands run verbatim, with their default time limits) checks the docs, not memory:
# it runs in `make test` only.
SANITIZE_FLAGS := -fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_SECONDS ?= 60
test-sanitize: deps
	@test -f build-sanitize/CMakeCache.txt || cmake -S . -B build-sanitize $(GENERATOR) \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPERFSIM_CUDA=OFF -DPERFSIM_BENCH=OFF -DPERFSIM_FUZZ=ON \
	  "-DCMAKE_CXX_FLAGS=$(SANITIZE_FLAGS)" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
	@cmake --build build-sanitize -j $(JOBS) --target perfsim_test_targets
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-sanitize --output-on-failure -j $(JOBS) -LE 'gpu|docs' --timeout $(TEST_SECONDS)

fuzz: test-sanitize
	bash scripts/fuzz.sh build-sanitize $(FUZZ_SECONDS)

# On a GPU machine: build, ctest (unit + cli + gpu), compute-sanitizer memcheck of the GPU
# tests and the GPU benchmarks, with a summary table (scripts/gpu_check.sh; logs in
# build-gpu-logs). Fails with a clear message when no GPU is visible.
test-gpu:
	@BUILD=$(BUILD) JOBS=$(JOBS) bash scripts/gpu_check.sh

bench: configure
	@cmake --build $(BUILD) -j $(JOBS) --target perfsim_bench perfsim_bench_search perfsim_bench_serve
	./$(BUILD)/bench/perfsim_bench
	./$(BUILD)/bench/perfsim_bench_search
	./$(BUILD)/bench/perfsim_bench_serve

clean:
	rm -rf $(BUILD)
