#!/usr/bin/env bash
# Renders the charts docs/LOOKING_AT_A_RUN.md shows, from real runs, into docs/images/.
#
#   scripts/render_docs_charts.sh REPORT_DIR [cpu|cuda]
#
# Writes the JSON reports behind them into REPORT_DIR, draws every chart into REPORT_DIR/charts/
# (SVG and PNG) and copies the PNGs the page embeds into docs/images/. The backend (default
# cpu) executes scenarios/train_step.lua (CPU-sized with cpu, GPU-sized with cuda) and
# tests/plots/pipeline_2.lua on 2 ranks (2 GPUs with cuda; needs MPI); the scaling chart is a
# prediction (tests/cli/gpus_sweep.lua), the validation chart the saved H100 run priced again
# (tests/cli/h100_validation.json), unless VALIDATION=FILE names another validate JSON report.
# PERFSIM=path/to/perfsim (default build/perfsim). Say in the page which backend and date made
# them: the last lines printed give both.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 REPORT_DIR [cpu|cuda]" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
out=$1
backend=${2:-cpu}
bin=${PERFSIM:-build/perfsim}
case $backend in
  cpu) train_sizes=(--set seq=128) ;;
  cuda) train_sizes=(--set batch=8 --set seq=1024) ;;
  *)
    echo "backend must be cpu or cuda, got '$backend'" >&2
    exit 2
    ;;
esac
[ -x "$bin" ] || { echo "no perfsim at $bin (build it, or set PERFSIM)" >&2; exit 1; }
mkdir -p "$out" docs/images

"$bin" run scenarios/train_step.lua --backend "$backend" "${train_sizes[@]}" -q -o "$out/train_step.json"
"$bin" run tests/plots/pipeline_2.lua --backend "$backend" --gpus 2 -q -o "$out/pipeline_2.json"
"$bin" run tests/cli/gpus_sweep.lua --backend none -q -o "$out/gpus_sweep.json"
if [ -n "${VALIDATION:-}" ]; then
  cp "$VALIDATION" "$out/validation.json"
else
  "$bin" validate --measurements tests/cli/h100_validation.json -q -o "$out/validation.json"
fi

"$bin" plot "$out/train_step.json" "$out/charts/train_step"
"$bin" plot "$out/pipeline_2.json" "$out/charts/pipeline_2" --step pp2
"$bin" plot "$out/gpus_sweep.json" "$out/charts/gpus_sweep"
"$bin" plot "$out/validation.json" "$out/charts/validation"

for chart in roofline stack memory op_classes; do
  cp "$out/charts/train_step/$chart.png" "docs/images/$chart.png"
done
cp "$out/charts/pipeline_2/ranks.png" docs/images/ranks.png
cp "$out/charts/gpus_sweep/scaling.png" docs/images/scaling.png
cp "$out/charts/validation/validation.png" docs/images/validation.png

device=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["device"])' \
  "$out/train_step.json" 2>/dev/null || echo "?")
echo "rendered $(date -u +%Y-%m-%d) on the $backend backend ($device) into docs/images/"
