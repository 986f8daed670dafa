#!/usr/bin/env bash
# Fuzzes perfsim's input readers with libFuzzer (the targets of tests/fuzz, built by
# `make test-sanitize`: clang, ASan + UBSan).
#   scripts/fuzz.sh BUILD_DIR [SECONDS]       each target fuzzed for SECONDS (default 60), from a
#                                             random seed: new inputs every time
#   scripts/fuzz.sh --ci BUILD_DIR            each target fuzzed from libFuzzer seed 1 for a fixed
#                                             number of inputs (about a minute each on 2 cores):
#                                             the same tree meets the same inputs, so CI never
#                                             passes or fails by chance
#   scripts/fuzz.sh --replay BINARY TARGET    run the seeds and regressions once (a ctest case)
# Seeds: scenarios/, examples/, tests/ scripts for `scenario`; stdlib/profiles and the test
# profiles for `profile`; tests/fuzz/seeds/traffic for `traffic` (serve{} trace and lengths
# files, their first byte choosing the reader). A crash leaves its input in BUILD_DIR/fuzz/<target>/crashes and fails
# the run; copy it to tests/fuzz/regressions/<target>/ once fixed, so it replays in every ctest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

seeds() {  # $1 = target: the seed files, one per line
  case "$1" in
    scenario) find "$root/scenarios" "$root/examples" "$root/tests/dsl" "$root/tests/cli" \
                -name '*.lua' ! -name '*profile*' | sort ;;
    profile) find "$root/stdlib/profiles" "$root/tests/cli" -name '*.lua' ! -name 'loop_*' \
                \( -path '*/profiles/*' -o -name '*profile*' \) | sort ;;
    traffic) find "$root/tests/fuzz/seeds/traffic" -type f | sort ;;
    *) echo "fuzz.sh: unknown target '$1' (scenario, profile, traffic)" >&2; exit 2 ;;
  esac
}

# libFuzzer options shared by both modes: inputs up to 64 KiB, 4 GiB of RSS, 15 s per input at
# most (a backstop: the harnesses bound each input's work and fail any input that takes over
# 5 s with its time, tests/fuzz/fuzz_scenario.cpp).
common=(-max_len=65536 -timeout=15 -rss_limit_mb=4096)

if [ "${1:-}" = "--replay" ]; then
  binary="$2" target="$3"
  files=()
  while IFS= read -r f; do files+=("$f"); done < <(seeds "$target")
  if [ -d "$root/tests/fuzz/regressions/$target" ]; then
    while IFS= read -r f; do files+=("$f"); done < <(find "$root/tests/fuzz/regressions/$target" -type f | sort)
  fi
  echo "replaying ${#files[@]} inputs through $(basename "$binary")"
  log="$(mktemp)"
  trap 'rm -f "$log"' EXIT
  if ! "$binary" "${common[@]}" "${files[@]}" >"$log" 2>&1; then
    # libFuzzer prints "Running: FILE" before each input: the last one is the input that failed.
    failed=$(grep '^Running: ' "$log" | tail -n 1 | sed 's/^Running: //')
    finding=$(grep -E 'fuzz finding|ALARM|ERROR: |Deadly|SUMMARY' "$log" | awk 'NR == 1')
    echo "$(basename "$binary"): ${failed:-an input}: ${finding:-failed}" >&2
    tail -n 40 "$log"
    exit 1
  fi
  grep -c '^Running:' "$log" | sed 's/$/ inputs ran clean/'
  # libFuzzer prints "Executed FILE in N ms" after each: the slowest three, for the record.
  # awk reads every line: a `head` closing the pipe early would fail it (pipefail) by SIGPIPE.
  grep -E '^Executed .* in [0-9]+ ms' "$log" | awk '{print $(NF-1), $2}' | sort -rn |
    awk 'NR <= 3 {printf "  slowest: %s ms %s\n", $1, $2}'
  exit 0
fi

ci=0
if [ "${1:-}" = "--ci" ]; then
  ci=1
  shift
fi
build="${1:?usage: scripts/fuzz.sh [--ci] BUILD_DIR [SECONDS] | --replay BINARY TARGET}"
seconds="${2:-60}"
# --ci: inputs per target, from seed 1.
ci_runs() {
  case "$1" in
    scenario) echo 6000 ;;
    profile) echo 20000 ;;
    traffic) echo 200000 ;;
  esac
}
status=0
for target in scenario profile traffic; do
  binary="$build/tests/fuzz/fuzz_$target"
  [ -x "$binary" ] || { echo "fuzz.sh: $binary missing: run make test-sanitize first" >&2; exit 2; }
  work="$build/fuzz/$target"
  rm -rf "$work/corpus"  # the seeds of this tree, not an earlier run's
  mkdir -p "$work/corpus" "$work/crashes"
  while IFS= read -r f; do cp -f "$f" "$work/corpus/seed_$(basename "$f")"; done < <(seeds "$target")
  if [ "$ci" = 1 ]; then
    budget=(-seed=1 -runs="$(ci_runs "$target")")
    echo "fuzzing $target: $(ci_runs "$target") inputs from seed 1 (corpus $work/corpus)"
  else
    budget=(-max_total_time="$seconds")
    echo "fuzzing $target for $seconds s (corpus $work/corpus)"
  fi
  t0=$SECONDS
  if "$binary" "${common[@]}" "${budget[@]}" -print_final_stats=1 \
       -close_fd_mask=1 -artifact_prefix="$work/crashes/" "$work/corpus" >"$work/log.txt" 2>&1; then
    echo "  $target: $(grep -E '^stat::number_of_executed_units' "$work/log.txt" | awk '{print $2}') runs in $((SECONDS - t0)) s, no finding"
  else
    status=1
    echo "  $target: FOUND A CRASH; input in $work/crashes, log $work/log.txt:" >&2
    grep -E 'ERROR|finding|Deadly|Test unit written' "$work/log.txt" | awk 'NR <= 10' >&2
  fi
done
exit $status
