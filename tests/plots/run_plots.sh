#!/usr/bin/env bash
# Charts tests (ctest label `plots`): each case makes a report, draws its charts with
# `perfsim plot` (or --plots) and checks them with check_charts.py: every expected file, SVG
# that parses, the number of series per chart, PNG that decodes and is not blank, the charts
# without data left out.
#
#   tests/plots/run_plots.sh PERFSIM_BIN SOURCE_DIR CASE     # CASE: run validate scaling timeline ranks serve errors
set -uo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 PERFSIM_BIN SOURCE_DIR run|validate|scaling|timeline|ranks|serve|errors" >&2
  exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
case_name=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 1

# The interpreter perfsim itself picks (PERFSIM_PYTHON, python3, /usr/bin/python3): the checker
# reads PNGs faster through its matplotlib. Without matplotlib anywhere (a machine set up
# without `make deps`) the drawing cases are skipped (exit 77, ctest's SKIP_RETURN_CODE).
checker=
for py in ${PERFSIM_PYTHON:-python3 /usr/bin/python3}; do
  if "$py" -c 'import matplotlib' 2>/dev/null; then
    checker=$py
    break
  fi
done
if [ -z "$checker" ] && [ "$case_name" != errors ]; then
  echo "plots $case_name: skipped: no python3 with matplotlib (install python3-matplotlib: make deps)"
  exit 77
fi
[ -n "$checker" ] || checker=python3
check() { "$checker" "$src/tests/plots/check_charts.py" "$@"; }

failed=0
fail() {
  echo "FAIL  $*"
  failed=1
}
# Runs perfsim; its stderr goes to $tmp/err (shown on failure), its exit status is checked.
run() {
  local want=$1
  shift
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" != "$want" ]; then
    fail "perfsim $* exited $rc, expected $want"
    sed 's/^/      | /' "$tmp/err" | head -20
  fi
}
expect_err() { grep -Eq -- "$1" "$tmp/err" || { fail "stderr does not match /$1/"; sed 's/^/      | /' "$tmp/err"; }; }
# The number of lanes in a timeline SVG whose id starts with series-timeline-PREFIX.
lanes() { grep -o "id=\"series-timeline-$2[^\"]*\"" "$1" | sort -u | wc -l; }
expect_lanes() {
  local n
  n=$(lanes "$1" "$2")
  [ "$n" = "$3" ] || fail "$1: $n lanes series-timeline-$2*, expected $3"
}
same_files() {
  for f in "$1"/*; do
    cmp -s "$f" "$2/$(basename "$f")" || fail "$(basename "$f") differs between two renders of one report"
  done
}

case $case_name in
  run)
    # A decode step of tiny-llama on the CPU backend: four steps, the last (fp8) not executed.
    run 0 run tests/cli/tiny_decode.lua --backend cpu -q -o "$tmp/r.json"
    run 0 plot "$tmp/r.json" "$tmp/charts"
    expect_err '^perfsim: plot: skipped scaling: every step runs on 1 GPU'
    expect_err '^perfsim: plot: skipped ranks: no step runs over several GPUs'
    expect_err '^perfsim: plot: skipped timeline: it needs a trace, not a report: perfsim run SCENARIO --trace t.json'
    expect_err '^perfsim: plot: wrote 4 charts to .* \(roofline, stack, memory, op_classes\)'
    grep -q 'serve' "$tmp/err" && fail "a report of model steps names the serving charts: $(cat "$tmp/err")"
    check "$tmp/charts" roofline=2 stack=4 memory=10 op_classes=12 --absent scaling ranks validation serve_latency_cdf \
      serve_percentiles serve_timeline serve_load serve_step_error || failed=1
    # The same report drawn again gives the same bytes.
    run 0 plot "$tmp/r.json" "$tmp/again" -q
    [ -s "$tmp/err" ] && fail "-q printed: $(cat "$tmp/err")"
    same_files "$tmp/charts" "$tmp/again"
    # --plots on run: the report just produced, drawn without a file of it.
    run 0 run tests/cli/tiny_decode.lua --backend cpu -q --plots "$tmp/run_plots/sub"
    check "$tmp/run_plots/sub" roofline=2 stack=4 memory=10 op_classes=12 --absent scaling ranks || failed=1
    # Steps that do not fit in memory are drawn apart in the stack chart (bars and speedups),
    # and only those.
    run 0 run tests/plots/unfit.lua --backend none -q --plots "$tmp/unfit"
    for id in unfit-stack-time-predicted unfit-stack-speedup; do
      grep -q "id=\"$id" "$tmp/unfit/stack.svg" || fail "stack chart: no $id for the steps that do not fit"
    done
    n=$(grep -c 'does not fit)' "$tmp/unfit/stack.svg")
    [ "$n" -eq 2 ] || fail "stack chart: $n speedups marked 'does not fit', expected 2"
    grep -q 'id="unfit-' "$tmp/charts/stack.svg" && fail "stack chart: a report whose steps all fit marks one as unfit"
    ;;
  validate)
    # The saved H100 validation run priced again (nothing executed), charted through --plots.
    run 0 validate --measurements tests/cli/h100_validation.json -q -o "$tmp/v.json" --plots "$tmp/vplots"
    check "$tmp/vplots" validation=8 --absent roofline stack memory op_classes scaling ranks || failed=1
    run 0 plot "$tmp/v.json" "$tmp/vplot"
    expect_err '^perfsim: plot: wrote 1 chart to .* \(validation\)'
    check "$tmp/vplot" validation=8 || failed=1
    same_files "$tmp/vplots" "$tmp/vplot"
    ;;
  scaling)
    # A sweep over gpus (predicted only): tokens/s and efficiency vs GPUs.
    run 0 run tests/cli/gpus_sweep.lua --backend none -q -o "$tmp/s.json"
    run 0 plot "$tmp/s.json" "$tmp/charts"
    expect_err '^perfsim: plot: 5 sweep points: the per-step charts show point 1'
    expect_err '^perfsim: plot: skipped stack: one stack step'
    check "$tmp/charts" scaling=2 roofline=1 memory=7 op_classes=7 --absent stack ranks || failed=1
    # A pipeline predicted only: the per-rank chart shows each stage's prediction.
    run 0 run tests/plots/pipeline_2.lua --backend none -q --plots "$tmp/pp"
    check "$tmp/pp" ranks=2 stack=2 roofline=1 memory=7 op_classes=7 --absent scaling || failed=1
    ;;
  timeline)
    # The trace of a decode step predicted only: the first step's predicted process, one lane
    # per track (step, main stream, host issue).
    run 0 run tests/cli/tiny_decode.lua --backend none -q --trace "$tmp/t.json"
    run 0 plot "$tmp/t.json" "$tmp/charts"
    expect_err '^perfsim: plot: wrote 1 chart to .* \(timeline\)'
    check "$tmp/charts" timeline=3 --absent roofline stack memory op_classes scaling ranks validation || failed=1
    expect_lanes "$tmp/charts/timeline.svg" predicted-step 1
    expect_lanes "$tmp/charts/timeline.svg" predicted-main-stream 1
    expect_err '^perfsim: plot: the timeline shows step fp32 of 4; --step NAME picks another \(\+bf16, \+flash_attention, \+fp8\)$'
    # Another step by name (case and a leading + do not matter); the same trace twice, the same bytes.
    run 0 plot "$tmp/t.json" "$tmp/bf16" --step BF16 -q
    check "$tmp/bf16" timeline=3 || failed=1
    run 0 plot "$tmp/t.json" "$tmp/again" -q
    same_files "$tmp/charts" "$tmp/again"
    # A step the trace does not hold, --point on a trace: one line, nothing written.
    run 1 plot "$tmp/t.json" "$tmp/bad_step" --step fp9
    expect_err '^perfsim: error: --step fp9: the trace holds no such step \(the steps: fp32, \+bf16, \+flash_attention, \+fp8\)$'
    run 1 plot "$tmp/t.json" "$tmp/bad_point" --point 2
    expect_err '^perfsim: error: --point picks a sweep point of a run report; .* is a trace'
    ls "$tmp/bad_step"/*.svg "$tmp/bad_point"/*.svg >/dev/null 2>&1 && fail "timeline written for a bad --step or --point"
    ;;
  ranks)
    # The pipeline executed on 2 CPU ranks (mpirun): each rank measured beside its stage.
    run 0 run tests/plots/pipeline_2.lua --backend cpu --gpus 2 -q -o "$tmp/pp.json" --trace "$tmp/t.json"
    run 0 plot "$tmp/pp.json" "$tmp/charts" --step pp2
    check "$tmp/charts" ranks=4 roofline=2 stack=4 --absent scaling || failed=1
    # Its trace: the first step executed on ranks, a process per rank with its own lanes
    # (step, main stream, its pipeline sends and receives).
    run 0 plot "$tmp/t.json" "$tmp/timeline"
    expect_err '^perfsim: plot: the timeline shows step pp2 of 2'
    check "$tmp/timeline" timeline=8+ || failed=1
    for r in 0 1; do
      n=$(lanes "$tmp/timeline/timeline.svg" "rank$r-")
      [ "$n" -ge 3 ] || fail "timeline: rank $r has $n lanes, expected at least 3 (step, main stream, pipeline)"
      expect_lanes "$tmp/timeline/timeline.svg" "rank$r-main-stream" 1
    done
    expect_lanes "$tmp/timeline/timeline.svg" rank2- 0
    ;;
  serve)
    # A serving scenario predicted (tiny-llama, 40 requests; static, then continuous batching over
    # paged KV): its engine runs' charts, a line or panel per stack step, and none of the model
    # steps' charts.
    run 0 run tests/plots/serve_tiny.lua --backend none -q -o "$tmp/r.json" --trace "$tmp/t.json"
    run 0 plot "$tmp/r.json" "$tmp/charts"
    expect_err '^perfsim: plot: skipped serve_load: no sweep over the load of a serving scenario'
    expect_err '^perfsim: plot: skipped serve_step_error: no stack step was executed \(a run on a backend executes them'
    expect_err '^perfsim: plot: wrote 3 charts to .* \(serve_latency_cdf, serve_percentiles, serve_timeline\), each'
    grep -q 'roofline' "$tmp/err" && fail "a serving report's notes name the model steps' charts: $(cat "$tmp/err")"
    check "$tmp/charts" serve_latency_cdf=4 serve_percentiles=6 serve_timeline=4 \
      --absent serve_load serve_step_error serve_engines serve_kv_transfer serve_speculative roofline stack memory \
      op_classes scaling ranks validation || failed=1
    expect_err '^perfsim: plot: skipped serve_engines: no stack step serves with several engines'
    expect_err '^perfsim: plot: skipped serve_speculative: no stack step decodes speculatively'
    # Speculative decoding, predicted: the tokens a verify yielded and the expectation, the TPOT
    # line; executed on the CPU backend, the measured bar and line beside them.
    run 0 run tests/plots/serve_tiny.lua --backend none -q --set speculative=true -o "$tmp/spec.json"
    run 0 plot "$tmp/spec.json" "$tmp/spec" -q
    check "$tmp/spec" serve_speculative=3 || failed=1
    grep -q 'k = 3, α = 0.6' "$tmp/spec/serve_speculative.svg" || fail "serve_speculative: k and α not named"
    run 0 run tests/plots/serve_tiny.lua --backend cpu -q --set speculative=true -o "$tmp/spec_x.json"
    run 0 plot "$tmp/spec_x.json" "$tmp/spec_x" -q
    check "$tmp/spec_x" serve_speculative=5 || failed=1
    grep -q 'id="series-serve_speculative-tokens-measured-2"' "$tmp/spec_x/serve_speculative.svg" ||
      fail "serve_speculative: no measured bar of the speculative step"
    # A service of several engines (1P1D): each engine's bars (four panels) and the KV transfers.
    run 0 run tests/mpi/serve_pd_2.lua --backend none -q -o "$tmp/pd.json"
    run 0 plot "$tmp/pd.json" "$tmp/pd" -q
    check "$tmp/pd" serve_engines=4 serve_kv_transfer=1 serve_latency_cdf=2 || failed=1
    grep -q 'prefill 0' "$tmp/pd/serve_engines.svg" || fail "serve_engines: no prefill engine named"
    # Two replicas: their bars, and no transfers.
    run 0 run tests/mpi/serve_replicas_2.lua --backend none -q -o "$tmp/rep.json"
    run 0 plot "$tmp/rep.json" "$tmp/rep" -q
    check "$tmp/rep" serve_engines=4 --absent serve_kv_transfer || failed=1
    run 0 plot "$tmp/r.json" "$tmp/again" -q
    same_files "$tmp/charts" "$tmp/again"
    # --step: that step's timeline alone; a step the run does not hold names those it does.
    run 0 plot "$tmp/r.json" "$tmp/one" --step continuous -q
    check "$tmp/one" serve_timeline=2 serve_latency_cdf=4 || failed=1
    grep -q 'series-serve_timeline-batch-1' "$tmp/one/serve_timeline.svg" || fail "--step continuous: not its timeline"
    run 1 plot "$tmp/r.json" "$tmp/bad_step" --step paged
    expect_err '^perfsim: error: --step paged: no such step \(the steps: static, \+continuous\)$'
    # Swept over the arrival rate (--plots on run): the latency-vs-load curves, five series per step.
    run 0 run tests/plots/serve_tiny.lua --backend none -q --set sweep=true --plots "$tmp/load"
    check "$tmp/load" serve_load=10 serve_latency_cdf=4 serve_percentiles=6 serve_timeline=4 || failed=1
    # Its trace: the engine steps of the first stack step's process, one lane.
    run 0 plot "$tmp/t.json" "$tmp/timeline"
    expect_err '^perfsim: plot: the timeline shows step static of 2'
    check "$tmp/timeline" timeline=1 || failed=1
    expect_lanes "$tmp/timeline/timeline.svg" serve-engine-steps 1
    # The swept scenario executed on the CPU backend: every serving chart draws the measured run
    # beside the predicted one (point 1 for the per-point charts), and serve_step_error each
    # executed step's engine steps, decode-only and with prefill, priced against their wall time.
    run 0 run tests/plots/serve_tiny.lua --backend cpu -q --set sweep=true -o "$tmp/x.json" --trace "$tmp/xt.json"
    run 0 plot "$tmp/x.json" "$tmp/executed"
    expect_err '^perfsim: plot: wrote 5 charts to .* \(serve_latency_cdf, serve_percentiles, serve_timeline, serve_load, serve_step_error\)'
    check "$tmp/executed" serve_latency_cdf=8 serve_percentiles=12 serve_timeline=8 serve_load=20 serve_step_error=4 || failed=1
    for id in serve_latency_cdf-e2e-measured-1 serve_percentiles-ttft-p99-measured serve_timeline-batch-measured-0 \
      serve_load-throughput-measured-1 serve_step_error-decode-0 serve_step_error-prefill-1; do
      grep -q "id=\"series-$id\"" "$tmp/executed/${id%%-*}.svg" || fail "${id%%-*}: no series-$id"
    done
    # --step: that step's timeline and step errors alone.
    run 0 plot "$tmp/x.json" "$tmp/executed_one" --step continuous -q
    check "$tmp/executed_one" serve_timeline=4 serve_step_error=2 || failed=1
    # Its trace: the predicted and the measured process of the first stack step, a lane each.
    run 0 plot "$tmp/xt.json" "$tmp/executed_timeline"
    check "$tmp/executed_timeline" timeline=2 || failed=1
    expect_lanes "$tmp/executed_timeline/timeline.svg" serve-engine-steps 1
    expect_lanes "$tmp/executed_timeline/timeline.svg" serve-measured-engine-steps 1
    ;;
  errors)
    run 0 run tests/cli/tiny_decode.lua --backend none -q -o "$tmp/r.json"
    # No interpreter, or one without matplotlib: what to install, and nothing written.
    PERFSIM_PYTHON=/no/such/python3 run 1 plot "$tmp/r.json" "$tmp/none"
    expect_err '^perfsim: error: charts need python3 \(PERFSIM_PYTHON=/no/such/python3 cannot be started\): install python3-matplotlib \(make deps\)$'
    printf '#!/bin/sh\nexec %s -S "$@"\n' "$(command -v python3)" >"$tmp/bare_python"
    chmod +x "$tmp/bare_python"
    PERFSIM_PYTHON=$tmp/bare_python run 1 plot "$tmp/r.json" "$tmp/none"
    expect_err '^perfsim: error: charts need matplotlib, which .*bare_python cannot import: install python3-matplotlib \(make deps\)$'
    PERFSIM_PYTHON=$tmp/bare_python run 1 run tests/cli/tiny_decode.lua --backend none -q --plots "$tmp/none"
    expect_err 'install python3-matplotlib'
    grep -q 'Step time' "$tmp/out" && fail "run --plots without matplotlib ran before failing"
    ls "$tmp/none"/*.svg >/dev/null 2>&1 && fail "charts written without matplotlib"
    # A step or point the report does not hold: one line, no chart.
    run 1 plot "$tmp/r.json" "$tmp/bad_step" --step +fp9
    expect_err '^perfsim: error: --step \+fp9: no such step \(the steps: fp32, \+bf16, \+flash_attention, \+fp8\)$'
    run 1 plot "$tmp/r.json" "$tmp/bad_point" --point 2
    expect_err '^perfsim: error: --point 2: the report holds 1 sweep point$'
    ls "$tmp/bad_step"/*.svg "$tmp/bad_point"/*.svg >/dev/null 2>&1 && fail "charts written for a bad --step or --point"
    # A comparison of several validation runs has no per-op pairs to chart.
    run 2 validate --measurements tests/cli/h100_validation.json --measurements tests/cli/h100_validation.json --plots "$tmp/cmp"
    expect_err '^perfsim: error: --plots charts one run'
    ;;
  *)
    echo "unknown case '$case_name'" >&2
    exit 2
    ;;
esac

[ "$failed" = 0 ] && echo "plots $case_name: ok"
exit "$failed"
