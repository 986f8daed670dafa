#!/usr/bin/env bash
# One command for a machine of several GPUs: build perfsim (Release), run the tests (unit, cli,
# gpu; the NCCL tests use every visible GPU), calibrate the device, then time every collective
# over every group of 2, 4, ... visible GPUs with `perfsim validate` (the tiny suite: the
# collectives are what this run is for) priced by that profile. A summary table comes last.
# Everything lands in ${OUT:-build-gpu-logs}: <mode>.lua (the profile), <mode>_points.csv,
# collectives_<mode>.json and .md (the validate reports), one log per step.
#   scripts/gpu_collectives.sh     (MODE=quick|full  BUILD=build-gpu  JOBS=$(nproc)
#                                   TESTS=0 to skip ctest  PROFILE=<existing profile: skip
#                                   calibrating>  REPEAT=<validations of the profile, default 1>)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
LOGS=${OUT:-build-gpu-logs}
JOBS=${JOBS:-$(nproc)}
MODE=${MODE:-quick}
mkdir -p "$LOGS"
# shellcheck source=scripts/steps.sh
source scripts/steps.sh

require_gpus gpu_collectives 2
nvidia-smi topo -m >"$LOGS/topology.log" 2>&1 || true
use_deps
gen=""; command -v ninja >/dev/null && gen="-G Ninja"
step configure configure.log cmake -S . -B "$BUILD" $gen -DCMAKE_BUILD_TYPE=Release -DPERFSIM_BENCH=OFF \
  || { summary; exit 1; }
step build build.log cmake --build "$BUILD" -j "$JOBS" || { summary; exit 1; }
perfsim="$BUILD/perfsim"
status=0
if [ "${TESTS:-1}" = 1 ]; then
  step ctest ctest.log ctest --test-dir "$BUILD" --output-on-failure -j 4 || status=1
  record "tests" "$(grep -E 'tests passed|tests failed' "$LOGS/ctest.log" | tail -1)"
fi

if [ -n "${PROFILE:-}" ]; then
  profile=$PROFILE
  record profile "$profile (given)"
else
  profile="$LOGS/$MODE.lua"
  quick=(); [ "$MODE" = quick ] && quick=(--quick)
  step "calibrate ($MODE)" "calibrate_$MODE.log" "$perfsim" calibrate --backend cuda "${quick[@]}" \
    -o "$profile" --points "$LOGS/${MODE}_points.csv" || status=1
fi
for i in $(seq 1 "${REPEAT:-1}"); do
  [ -f "$profile" ] || break
  suffix=$MODE; [ "$i" -gt 1 ] && suffix="${MODE}_$i"
  step "validate collectives ($suffix)" "validate_$suffix.log" "$perfsim" validate --backend cuda --quick \
    --suite tests/cli/validation --profile "$profile" --format json -o "$LOGS/collectives_$suffix.json" || status=1
  # The same measurements as a readable report (nothing runs again).
  [ -f "$LOGS/collectives_$suffix.json" ] && "$perfsim" validate --measurements "$LOGS/collectives_$suffix.json" \
    --profile "$profile" -o "$LOGS/collectives_$suffix.md" -q
done
summary
for f in "$LOGS"/collectives_*.md; do
  [ -f "$f" ] && { echo; echo "== $(basename "$f")"; grep -A12 "collective time" "$f" | head -14; }
done
exit $status
