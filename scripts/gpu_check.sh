#!/usr/bin/env bash
# One command for a GPU machine: unpack the offline dependencies when the system lacks them,
# configure and build (Release), run ctest (unit, cli and gpu tests), run the GPU tests
# under compute-sanitizer memcheck, racecheck and synccheck, then the GPU benchmarks when they
# were built.
# Logs go to ${OUT:-build-gpu-logs}; a summary table is printed last. Exit status: non-zero
# when any step failed or when no GPU is visible (the GPU tests would only be skipped).
#   scripts/gpu_check.sh            (BUILD=build-gpu JOBS=$(nproc) MEMCHECK_TIMEOUT=0
#                                    SCENARIOS=1 to override)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
LOGS=${OUT:-build-gpu-logs}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$LOGS"
# shellcheck source=scripts/steps.sh
source scripts/steps.sh
status=0

require_gpus gpu_check
use_deps

gen=""; command -v ninja >/dev/null && gen="-G Ninja"
step configure configure.log cmake -S . -B "$BUILD" $gen -DCMAKE_BUILD_TYPE=Release || { summary; exit 1; }
step build build.log cmake --build "$BUILD" -j "$JOBS" || { summary; exit 1; }
step ctest ctest.log ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" || status=1
if grep -q "gpu .*Skipped\|Not Run" "$LOGS/ctest.log"; then record "gpu tests" "SKIPPED: no device seen by the tests"; status=1; fi

if command -v compute-sanitizer >/dev/null 2>&1; then
  # MEMCHECK_TIMEOUT bounds the run (memcheck slows kernels 10-100x); 0 = no bound.
  # API errors are not reported: the out-of-memory test provokes a failing cudaMalloc on
  # purpose, and every API call is checked by the code itself (PERFSIM_CUDA_CHECK).
  step memcheck memcheck.log timeout "${MEMCHECK_TIMEOUT:-0}" compute-sanitizer --tool memcheck \
    --report-api-errors no --error-exitcode 3 "$BUILD/tests/gpu/perfsim_gpu_tests" || status=1
  # Barriers that not every thread reaches (synccheck) and shared-memory races between a
  # block's threads (racecheck), over the tests of perfsim's own shared-memory kernels (the
  # whole suite runs for hours under racecheck). racecheck also flags cuBLAS's split-K kernels
  # (nvjet_*: asynchronous shared-memory copies it does not follow, 24 reports on an H100 on
  # 2026-11-27): only races in other kernels fail the step.
  kernels='*flash attention*,cuda kernels*,*mixture-of-experts*'
  step synccheck synccheck.log timeout "${MEMCHECK_TIMEOUT:-0}" compute-sanitizer --tool synccheck \
    --report-api-errors no --error-exitcode 3 "$BUILD/tests/gpu/perfsim_gpu_tests" -tc="$kernels" || status=1
  ours_only() {
    timeout "${MEMCHECK_TIMEOUT:-0}" compute-sanitizer --tool racecheck --report-api-errors no \
      "$BUILD/tests/gpu/perfsim_gpu_tests" -tc="$kernels" || return 1
    ! grep "Race reported" -A1 "$LOGS/racecheck.log" 2>/dev/null | grep -v "nvjet_" | grep -q "access at"
  }
  step racecheck racecheck.log ours_only || status=1
else
  record memcheck "SKIPPED: compute-sanitizer not on PATH (it ships in the CUDA toolkit's bin/)"
fi

# Every executable built in bench/cuda runs with its defaults (bench_copy, bench_gemm,
# bench_launch, bench_nccl, perfsim_cuda_bench), except bench_flash below.
benches=$(find "$BUILD/bench/cuda" -maxdepth 1 -type f -executable 2>/dev/null | sort)
# bench_flash takes a shape: time the forward, backward and decode shapes the goals in docs/PERFORMANCE.md name.
flash_cases=("fwd bf16 4 4096 4096 16 16 128 0" "fwd bf16 4 4096 4096 16 16 128 1"
             "bwd bf16 4 4096 4096 16 16 128 0" "decode bf16 8 1 8192 32 8 128 0")
if [ -n "$benches" ]; then
  for b in $benches; do
    if [ "$(basename "$b")" = bench_flash ]; then
      for c in "${flash_cases[@]}"; do
        # shellcheck disable=SC2086
        step "bench_flash $c" "bench_flash_$(echo "$c" | tr ' ' '_').log" "$b" $c || status=1
      done
    else
      step "bench $(basename "$b")" "$(basename "$b").log" "$b" || status=1
    fi
  done
else
  record benchmarks "none built (configure with -DPERFSIM_BENCH=ON)"
fi

# The scenarios on the GPU: predicted next to measured, per optimization step.
if [ "${SCENARIOS:-1}" != 0 ]; then
  for sc in scenarios/llm_decode.lua scenarios/train_step.lua scenarios/prefill.lua \
            scenarios/data_loading.lua; do
    step "run $(basename "$sc")" "run_$(basename "$sc" .lua).md" \
      "$BUILD/perfsim" run "$sc" --backend cuda --format md --quiet || status=1
  done
  # Long context: prompt + the 128 tokens the prefill sizes its KV cache for = max_seq 8192.
  step "run prefill.lua prompt=8064" "run_prefill_8064.md" \
    "$BUILD/perfsim" run scenarios/prefill.lua --backend cuda --format md --quiet \
    --set prompt=8064 --set repeats=3 || status=1
  # Data loading where the step is large enough for the GPU to notice: GPT-2 at seq 1024.
  step "run data_loading.lua gpt2" "run_data_loading_gpt2.md" \
    "$BUILD/perfsim" run scenarios/data_loading.lua --backend cuda --format md --quiet \
    --set model=gpt2 --set batch=8 --set seq=1024 || status=1
fi

summary
exit $status
