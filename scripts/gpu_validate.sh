#!/usr/bin/env bash
# One command for a GPU machine: build perfsim (Release), calibrate the device (full, then
# --quick, each timed), validate the cost model with the fresh full profile and with the
# datasheet profile, and print a summary table last. Everything lands in ${OUT:-build-gpu-logs}:
#   <name>.lua (the calibrated profile), points.csv (what it was fitted on), quick.lua,
#   validation_{calibrated,datasheet}.{md,json},
#   and one log per step.
#   scripts/gpu_validate.sh        (BUILD=build-gpu JOBS=$(nproc) NAME=<catalog>-local QUICK=1
#                                   MAX_ERROR=<pct> PROFILE=<existing profile: skip calibrating>
#                                   FORMATS="md json" DATASHEET=1 to override)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
LOGS=${OUT:-build-gpu-logs}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$LOGS"
# shellcheck source=scripts/steps.sh
source scripts/steps.sh

require_gpus gpu_validate
use_deps
gen=""; command -v ninja >/dev/null && gen="-G Ninja"
step configure configure.log cmake -S . -B "$BUILD" $gen -DCMAKE_BUILD_TYPE=Release -DPERFSIM_BENCH=OFF \
  || { summary; exit 1; }
step build build.log cmake --build "$BUILD" --target perfsim -j "$JOBS" || { summary; exit 1; }
perfsim="$BUILD/perfsim"
name=${NAME:-}
name_args=(); [ -n "$name" ] && name_args=(--name "$name")
status=0
if [ -n "${PROFILE:-}" ]; then
  profile=$PROFILE
  record "profile" "$profile (given)"
else
  profile="$LOGS/${name:-profile}.lua"
  step "calibrate (full)" calibrate.log "$perfsim" calibrate --backend cuda "${name_args[@]}" -o "$profile" \
    --points "$LOGS/points.csv" || status=1
  if [ "${QUICK:-1}" = 1 ]; then
    step "calibrate --quick" calibrate_quick.log "$perfsim" calibrate --backend cuda --quick -o "$LOGS/quick.lua" || status=1
  fi
fi
max=(); [ -n "${MAX_ERROR:-}" ] && max=(--max-error "$MAX_ERROR")
for fmt in ${FORMATS:-md}; do
  [ -f "$profile" ] || break
  step "validate (calibrated, $fmt)" "validate_calibrated_$fmt.log" "$perfsim" validate --backend cuda \
    --profile "$profile" "${max[@]}" -o "$LOGS/validation_calibrated.$fmt" || status=1
done
if [ "${DATASHEET:-1}" = 1 ]; then
  step "validate (datasheet)" validate_datasheet.log "$perfsim" validate --backend cuda --profile datasheet \
    -o "$LOGS/validation_datasheet.md" || status=1
fi
summary
for f in validation_calibrated.md validation_datasheet.md; do
  [ -f "$LOGS/$f" ] && { echo; echo "== $f (overall)"; grep -i -A12 "^#* *overall\|^overall" "$LOGS/$f" | head -16; }
done
exit $status
