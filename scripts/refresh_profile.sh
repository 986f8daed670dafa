#!/usr/bin/env bash
# Refreshes the shipped profile of the GPU this machine has, in one call on a GPU machine:
# builds perfsim, calibrates the device (full plan, with its points), adds the points to the
# profile's pool (tests/profiles/NAME/), takes the fresh calibration's serving-engine host
# figures and kernel fingerprint into the merge base, and rebuilds stdlib/profiles/NAME.lua
# with scripts/rebuild_profiles.sh. The launch, dispatch and link figures of the base stay
# (one machine start's host figures are not better than another's). Which profile: H100 →
# h100-local, H200 → h200-local (NAME=... for another).
#   scripts/refresh_profile.sh            (BUILD=build-gpu JOBS=$(nproc) NAME=... to override)
# Everything it changes is also copied under ${OUT:-build-gpu-logs}/refreshed/ (same paths), with
# the calibration's log, profile and points, for a machine whose tree does not come back.
#   NAME=h200-local BUILD=build scripts/refresh_profile.sh --from POINTS.csv PROFILE.lua
# does the same on any machine from a calibration made elsewhere (its --points file and the
# profile it wrote): nothing is built or measured.
# Then say in the shipped profile's provenance comment (its lines from the fifth) what was
# pooled: rebuild_profiles.sh keeps that comment as it is.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
LOGS=${OUT:-build-gpu-logs}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$LOGS"
# shellcheck source=scripts/steps.sh
source scripts/steps.sh

from_points="" from_profile=""
if [ "${1:-}" = "--from" ]; then
  [ $# -eq 3 ] || { echo "usage: NAME=... $0 --from POINTS.csv PROFILE.lua" >&2; exit 2; }
  from_points=$2 from_profile=$3
  [ -n "${NAME:-}" ] || { echo "refresh_profile: --from needs NAME=h100-local or h200-local" >&2; exit 2; }
  gpu=""
else
  require_gpus refresh_profile
  use_deps
  gpu=$(head -1 "$LOGS/gpus.log")
fi
case "${NAME:-}:$gpu" in
  :*H100*) name=h100-local ;;
  :*H200*) name=h200-local ;;
  :*) echo "refresh_profile: no shipped profile for '$gpu': set NAME" >&2; exit 2 ;;
  *) name=$NAME ;;
esac
pool=tests/profiles/$name
[ -f "$pool/points.txt" ] || { echo "refresh_profile: $pool/points.txt missing: not a shipped profile" >&2; exit 2; }
perfsim="$BUILD/perfsim"
if [ -z "$from_points" ]; then
  gen=""; command -v ninja >/dev/null && gen="-G Ninja"
  step configure configure.log cmake -S . -B "$BUILD" $gen -DCMAKE_BUILD_TYPE=Release -DPERFSIM_BENCH=OFF || { summary; exit 1; }
  step build build.log cmake --build "$BUILD" --target perfsim -j "$JOBS" || { summary; exit 1; }
  step calibrate calibrate.log "$perfsim" calibrate --backend cuda --name "$name" \
    --points "$LOGS/$name-points.csv" -o "$LOGS/$name.lua" || { summary; exit 1; }
  from_points="$LOGS/$name-points.csv" from_profile="$LOGS/$name.lua"
fi

# A second calibration on the same day gets its own file: run_DATE.csv.gz, then run_DATEb, ...
run="run_$(date -u +%Y%m%d).csv.gz"
for suffix in b c d e f g h; do
  [ -e "$pool/$run" ] || break
  run="run_$(date -u +%Y%m%d)$suffix.csv.gz"
done
gzip -9 -c "$from_points" > "$pool/$run"
grep -qx "$run" "$pool/points.txt" || echo "$run" >> "$pool/points.txt"
# The base keeps its figures; the fresh calibration gives the engine's host work and the
# provenance (date, kernel fingerprint) of what was last timed.
python3 - "$pool/base.lua.gz" "$from_profile" <<'PY'
import gzip, re, sys
base_path, fresh_path = sys.argv[1], sys.argv[2]
base = gzip.open(base_path, "rt").read().splitlines()
fresh = open(fresh_path).read().splitlines()
take = {k: next((l for l in fresh if l.strip().startswith(k + " =")), None)
        for k in ("measured", "engine_host_per_op", "engine_host_per_step")}
out = [l for l in base if not l.strip().startswith(("engine_host_per_op =", "engine_host_per_step ="))]
for i, l in enumerate(out):
    if l.strip().startswith("measured =") and take["measured"]:
        out[i] = take["measured"]
    if l.strip().startswith("host_copy_bandwidth ="):
        at = i + 1
out[at:at] = [take[k] for k in ("engine_host_per_op", "engine_host_per_step") if take[k]]
gzip.open(base_path, "wt").write("\n".join(out) + "\n")
PY
step rebuild rebuild.log bash scripts/rebuild_profiles.sh "$perfsim" . || { summary; exit 1; }
mkdir -p "$LOGS/refreshed/$pool" "$LOGS/refreshed/stdlib/profiles"
cp "$pool/$run" "$pool/points.txt" "$pool/base.lua.gz" "$LOGS/refreshed/$pool/"
cp "stdlib/profiles/$name.lua" "$LOGS/refreshed/stdlib/profiles/"
record "profile" "stdlib/profiles/$name.lua rebuilt with $run pooled (copies under $LOGS/refreshed)"
summary
