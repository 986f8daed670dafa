#!/usr/bin/env bash
# Renders the charts docs/LOOKING_AT_A_RUN.md shows, from real runs, into docs/images/.
#
#   scripts/render_docs_charts.sh REPORT_DIR [cpu|cuda]
#   RUNS_ONLY=1 scripts/render_docs_charts.sh REPORT_DIR cuda      # the runs alone (a GPU machine)
#   REPORTS_ONLY=1 scripts/render_docs_charts.sh REPORT_DIR        # the drawing alone, from them
#
# Writes the JSON reports behind them into REPORT_DIR, draws every chart into REPORT_DIR/charts/
# (SVG and PNG) and copies the PNGs the page embeds into docs/images/. The backend (default
# cpu) executes scenarios/train_step.lua (CPU-sized with cpu, GPU-sized with cuda) and a pipeline
# of 2 stages on 2 ranks (needs MPI): tests/plots/pipeline_2.lua with cpu, charted at its step
# pp2; scenarios/validation_ranks/pipeline.lua on 2 GPUs with cuda, charted at its step
# "PP2 1F1B". Both write REPORT_DIR/pipeline_2.json and its trace REPORT_DIR/pipeline_2_trace.json,
# whose timeline at that step is docs/images/timeline.png (with cuda, timeline_interleaved.png at
# step "interleaved ×2" too; a REPORT_DIR without the trace skips both). The scaling chart is a prediction
# (tests/cli/gpus_sweep.lua), the validation chart the saved H100 run priced again
# (tests/cli/h100_validation.json), unless VALIDATION=FILE names another validate JSON report.
#
# Drawing needs python3 with matplotlib. Where the machine that runs lacks it (a GPU machine,
# say), make the reports there with RUNS_ONLY=1 (nothing drawn, nothing copied), bring REPORT_DIR
# over, and draw them with REPORTS_ONLY=1 (nothing run: train_step.json, pipeline_2.json,
# gpus_sweep.json and validation.json must be in REPORT_DIR; VALIDATION=FILE still replaces the
# last). With REPORTS_ONLY=1 the backend, which picks the pipeline's step, defaults to the one
# pipeline_2.json was run on. PERFSIM=path/to/perfsim (default build/perfsim). Say in the page
# which backend and date made them: the last lines printed give both.
set -euo pipefail

usage() {
  echo "usage: $0 REPORT_DIR [cpu|cuda]" >&2
  echo "       RUNS_ONLY=1 (write the reports, draw nothing) or REPORTS_ONLY=1 (draw the reports in REPORT_DIR, run nothing)" >&2
  exit 2
}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  usage
fi
cd "$(dirname "$0")/.."
out=$1
runs_only=${RUNS_ONLY:-0}
reports_only=${REPORTS_ONLY:-0}
bin=${PERFSIM:-build/perfsim}
if [ "$runs_only" = 1 ] && [ "$reports_only" = 1 ]; then
  echo "RUNS_ONLY=1 and REPORTS_ONLY=1 leave nothing to do: set one" >&2
  exit 2
fi
[ -x "$bin" ] || { echo "no perfsim at $bin (build it, or set PERFSIM)" >&2; exit 1; }

# The backend a report was run on (results[0].backend), or nothing.
report_backend() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["backend"])' "$1" 2>/dev/null || true
}

if [ "$reports_only" = 1 ]; then
  for f in train_step.json pipeline_2.json gpus_sweep.json; do
    [ -f "$out/$f" ] || { echo "REPORTS_ONLY=1: no $out/$f (make the reports first, e.g. with RUNS_ONLY=1)" >&2; exit 1; }
  done
  if [ -z "${VALIDATION:-}" ] && [ ! -f "$out/validation.json" ]; then
    echo "REPORTS_ONLY=1: no $out/validation.json (or set VALIDATION=FILE)" >&2
    exit 1
  fi
  backend=${2:-$(report_backend "$out/pipeline_2.json")}
else
  backend=${2:-cpu}
fi
case $backend in
  cpu)
    train_sizes=(--set seq=128)
    pipeline=(tests/plots/pipeline_2.lua --gpus 2)
    pipeline_step=pp2
    second_step=
    ;;
  cuda)
    train_sizes=(--set batch=8 --set seq=1024)
    pipeline=(scenarios/validation_ranks/pipeline.lua --gpus 2)
    pipeline_step="PP2 1F1B"
    second_step="interleaved ×2"
    ;;
  *)
    echo "backend must be cpu or cuda, got '$backend'" >&2
    exit 2
    ;;
esac
mkdir -p "$out"

if [ "$reports_only" != 1 ]; then
  "$bin" run scenarios/train_step.lua --backend "$backend" "${train_sizes[@]}" -q -o "$out/train_step.json"
  "$bin" run "${pipeline[@]}" --backend "$backend" -q -o "$out/pipeline_2.json" --trace "$out/pipeline_2_trace.json"
  "$bin" run tests/cli/gpus_sweep.lua --backend none -q -o "$out/gpus_sweep.json"
  if [ -z "${VALIDATION:-}" ]; then
    "$bin" validate --measurements tests/cli/h100_validation.json -q -o "$out/validation.json"
  fi
fi
if [ -n "${VALIDATION:-}" ]; then
  cp "$VALIDATION" "$out/validation.json"
fi

device=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["device"])' \
  "$out/train_step.json" 2>/dev/null || echo "?")
if [ "$runs_only" = 1 ]; then
  echo "ran $(date -u +%Y-%m-%d) on the $backend backend ($device) into $out/; draw them with:"
  echo "  REPORTS_ONLY=1 $0 $out $backend"
  exit 0
fi

"$bin" plot "$out/train_step.json" "$out/charts/train_step"
"$bin" plot "$out/pipeline_2.json" "$out/charts/pipeline_2" --step "$pipeline_step"
"$bin" plot "$out/gpus_sweep.json" "$out/charts/gpus_sweep"
"$bin" plot "$out/validation.json" "$out/charts/validation"
# The pipeline's trace as images: perfsim plot draws a trace's timeline, one step at a time.
if [ -f "$out/pipeline_2_trace.json" ]; then
  "$bin" plot "$out/pipeline_2_trace.json" "$out/charts/pipeline_2_trace" --step "$pipeline_step"
  if [ -n "$second_step" ]; then
    "$bin" plot "$out/pipeline_2_trace.json" "$out/charts/pipeline_2_trace_second" --step "$second_step"
  fi
else
  echo "no $out/pipeline_2_trace.json: timeline.png not redrawn" >&2
fi

mkdir -p docs/images
for chart in roofline stack memory op_classes; do
  cp "$out/charts/train_step/$chart.png" "docs/images/$chart.png"
done
cp "$out/charts/pipeline_2/ranks.png" docs/images/ranks.png
cp "$out/charts/gpus_sweep/scaling.png" docs/images/scaling.png
cp "$out/charts/validation/validation.png" docs/images/validation.png
if [ -f "$out/pipeline_2_trace.json" ]; then
  cp "$out/charts/pipeline_2_trace/timeline.png" docs/images/timeline.png
  if [ -n "$second_step" ]; then
    cp "$out/charts/pipeline_2_trace_second/timeline.png" docs/images/timeline_interleaved.png
  fi
fi

if [ "$reports_only" = 1 ]; then
  echo "drew $(date -u +%Y-%m-%d) from the $backend reports in $out/ ($device; written" \
    "$(date -u -r "$out/train_step.json" +%Y-%m-%d), the date of the runs if copying kept it) into docs/images/"
else
  echo "rendered $(date -u +%Y-%m-%d) on the $backend backend ($device) into docs/images/"
fi
