#!/usr/bin/env bash
# One command for a machine of 2 or more GPUs: build perfsim (Release) with MPI and NCCL, run
# the tests (unit, cli, gpu, and the MPI checks on CPU ranks), then execute the data-parallel
# example on every visible GPU as ranks (docs/RANKS.md) and alone on one GPU (no
# communication), check the sharded steps (data, pipeline, tensor parallelism) against one GPU's
# on GPU ranks, run the two-stage pipeline example, and print predicted vs measured per step
# with the overlap ratio.
# Reports land in ${OUT:-build-gpu-logs}: ranks_<n>.json and .txt, single.json and .txt.
#   scripts/gpu_ranks.sh     (BUILD=build-gpu  JOBS=$(nproc)  TESTS=0 to skip ctest
#                             MODEL=gpt2-medium  BATCH=8  SEQ=1024)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
LOGS=${OUT:-build-gpu-logs}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$LOGS"
# shellcheck source=scripts/steps.sh
source scripts/steps.sh

require_gpus gpu_ranks 2
gpus=$(grep -c '^GPU ' "$LOGS/gpus.log")
use_deps
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on shared machines
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gen=""; command -v ninja >/dev/null && gen="-G Ninja"
step configure configure.log cmake -S . -B "$BUILD" $gen -DCMAKE_BUILD_TYPE=Release -DPERFSIM_BENCH=OFF \
  || { summary; exit 1; }
grep -E "perfsim: (MPI|NCCL)" "$LOGS/configure.log"
step build build.log cmake --build "$BUILD" -j "$JOBS" || { summary; exit 1; }
perfsim="$BUILD/perfsim"
if [ "${TESTS:-1}" = 1 ]; then
  step ctest ctest.log ctest --test-dir "$BUILD" --output-on-failure -j 4
fi
# A shipped profile of this GPU prices the runs; without one, a quick calibration of this machine
# does (its collectives over the GPUs included), so no figure is priced from the datasheet alone.
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
prof=()
if grep -qF "device = \"$gpu_name\"" stdlib/profiles/*.lua; then
  record profile "shipped (stdlib/profiles: $gpu_name)"
else
  step "calibrate --quick (no profile of $gpu_name)" calibrate.log "$perfsim" calibrate --backend cuda --quick \
    -o "$LOGS/calibrated.lua" && prof=(--profile "$LOGS/calibrated.lua")
fi
sets=("${prof[@]}" --set "model=${MODEL:-gpt2-medium}" --set "batch=${BATCH:-8}" --set "seq=${SEQ:-1024}")
step "ranks x$gpus" "ranks_$gpus.txt" "$perfsim" run examples/data_parallel_ranks.lua --backend cuda --gpus "$gpus" \
  --quiet --set "gpus=$gpus" "${sets[@]}"
"$perfsim" run examples/data_parallel_ranks.lua --backend cuda --gpus "$gpus" --quiet --set "gpus=$gpus" \
  "${sets[@]}" -o "$LOGS/ranks_$gpus.json" >/dev/null 2>&1
step "one GPU" single.txt "$perfsim" run examples/data_parallel_ranks.lua --backend cuda --quiet --set gpus=1 "${sets[@]}"
"$perfsim" run examples/data_parallel_ranks.lua --backend cuda --quiet --set gpus=1 "${sets[@]}" \
  -o "$LOGS/single.json" >/dev/null 2>&1
for f in "ranks_$gpus" single; do
  echo "== $f"
  sed -n '/^Step time/,/speedup:/p' "$LOGS/$f.txt"
  sed -n '/^Ranks/,/slowest/p' "$LOGS/$f.txt"
done
# The sharded steps against one GPU's unsharded step, on GPU ranks (loss, gradients, weights):
# data, pipeline and tensor parallelism (with and without sequence parallelism) on 2 GPUs, and
# tensor × data parallelism on 4 when the machine has them.
step "check on GPU ranks" check_gpu.log mpirun -np 2 --bind-to none "$BUILD/tests/mpi/mpi_step_check" --backend cuda \
  tests/mpi/dp_steps_2.lua tests/mpi/pp_steps_2.lua tests/mpi/pp_schedules_2.lua tests/mpi/pp_gpipe_2.lua \
  tests/mpi/tp_steps_2.lua tests/mpi/tp_llama_2.lua tests/mpi/cp_steps_2.lua tests/mpi/cp_gpt_2.lua \
  tests/mpi/ep_steps_2.lua
grep -E "^rank 0:|MISMATCH|all steps|error" "$LOGS/check_gpu.log"
if [ "$gpus" -ge 4 ]; then
  step "check on 4 GPU ranks" check_gpu_4.log mpirun -np 4 --bind-to none "$BUILD/tests/mpi/mpi_step_check" \
    --backend cuda tests/mpi/dp_steps_4.lua tests/mpi/hybrid_shard_4.lua tests/mpi/tp_dp_4.lua tests/mpi/pp_dp_4.lua \
    tests/mpi/pp_dp_micro_4.lua tests/mpi/cp_dp_4.lua tests/mpi/cp_tp_gpt_4.lua tests/mpi/ep_dp_4.lua \
    tests/mpi/ep_tp_4.lua tests/mpi/ep_pp_4.lua tests/mpi/tp_zero_4.lua tests/mpi/pp_tied_zero_4.lua
  grep -E "^rank 0:|MISMATCH|all steps|error" "$LOGS/check_gpu_4.log"
fi
# The pipeline example keeps its own batch (micro-batches of 2 sequences, 4 of them).
psets=("${prof[@]}" --set "model=${MODEL:-gpt2-medium}" --set "seq=${SEQ:-1024}")
step "pipeline x2" pipeline_2.txt "$perfsim" run examples/pipeline_ranks.lua --backend cuda --gpus 2 --quiet "${psets[@]}"
step "pipeline one GPU" pipeline_1.txt "$perfsim" run examples/pipeline_ranks.lua --backend cuda --quiet --set stages=1 "${psets[@]}"
for f in pipeline_2 pipeline_1; do echo "== $f"; sed -n '/^Step time/,/speedup:/p' "$LOGS/$f.txt"; sed -n '/^Ranks/,/slowest/p' "$LOGS/$f.txt"; done
# Overlap: each step's measured time on the ranks over the same step alone on one GPU.
python3 - "$LOGS/ranks_$gpus.json" "$LOGS/single.json" <<'PY' || true
import json, sys
ranks, single = (json.load(open(p))["results"][0]["steps"] for p in sys.argv[1:3])
print("| step | ranks measured | one GPU measured | ratio | predicted ranks | predicted one GPU |")
print("|---|---|---|---|---|---|")
for r, s in zip(ranks, single):
    rm, sm = (r.get("measured") or {}).get("step_time_s"), (s.get("measured") or {}).get("step_time_s")
    ratio = f"{rm / sm:.3f}" if rm and sm else "-"
    f = lambda x: f"{x * 1e3:.2f} ms" if x else "-"
    print(f"| {r['step']} | {f(rm)} | {f(sm)} | {ratio} | {f(r['predicted']['step_time_s'])} | {f(s['predicted']['step_time_s'])} |")
PY
# The multi-GPU validation suite on every GPU as ranks: per step, per op and per collective.
step "validate x$gpus" validate_ranks.log "$perfsim" validate --gpus "$gpus" --backend cuda -q --rank-timeout 240 "${prof[@]}" \
  -o "$LOGS/validate_ranks.txt"
sed -n '/^Overall/,/^$/p;/^Step time/,/^$/p' "$LOGS/validate_ranks.txt"
summary
