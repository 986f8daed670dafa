#!/usr/bin/env bash
# CLI golden tests: runs every case of tests/cli/cases.txt against a built perfsim and compares
# stdout+stderr with tests/cli/golden/<name>.txt (or checks patterns, for machine-dependent runs).
#
#   tests/cli/run_golden.sh PERFSIM_BIN SOURCE_DIR        # check
#   UPDATE_GOLDEN=1 tests/cli/run_golden.sh ...           # rewrite the golden files
#   CASES=llm_decode tests/cli/run_golden.sh ...          # only cases whose name matches
#   JOBS=4 tests/cli/run_golden.sh ...                    # cases run side by side (default: nproc)
#   CASE_SECONDS=300                                       # a case running longer fails, named
#
# Case lines: NAME | EXIT | ARGUMENTS [| CHECK]...   ('#' starts a comment line)
# Commands run in SOURCE_DIR, so paths in the output are relative. ARGUMENTS are split like a
# shell would; {tmp} is a scratch directory. CHECKs:
# (the scratch path is printed as {tmp} in the output, so patterns and golden files say {tmp};
# the last field may be empty, as in "no_command | 2 |")
#   drop=REGEX     delete matching lines before comparing with the golden file
#   expect=REGEX   the output must match (grep -E); a case with expect/reject has no golden file
#   reject=REGEX   the output must not match
#   file=PATH      PATH must exist and be non-empty afterwards
#   nofile=PATH    PATH must not exist afterwards
#   needs=no-gpu   run only where no GPU is visible (nvidia-smi lists none); elsewhere skipped
set -uo pipefail
# Runs on the CPU are priced from the /proc estimate: no case calibrates this machine or
# writes to the user's cache (cli/host_profile_cache.hpp).
export PERFSIM_NO_CACHE=1

if [ $# -ne 2 ]; then
  echo "usage: $0 PERFSIM_BIN SOURCE_DIR" >&2
  exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
here="$src/tests/cli"
golden_dir="$here/golden"
update=${UPDATE_GOLDEN:-0}
only=${CASES:-}
jobs=${JOBS:-$(nproc)}
case_seconds=${CASE_SECONDS:-300}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# Splits a case line on " | " into the array `fields`.
split_fields() {
  local line=$1
  fields=()
  while [[ $line == *" | "* ]]; do
    fields+=("${line%% | *}")
    line=${line#* | }
  done
  fields+=("$line")
}

trim() {
  local s=$1
  s=${s#"${s%%[![:space:]]*}"}
  s=${s%"${s##*[![:space:]]}"}
  printf '%s' "$s"
}

# Runs case number $index (name, want, args set); leaves its verdict in $scratch/$index.ok or
# .fail and its time in $scratch/$index.time.
run_case() {
  local tmp out rc t0 took patterned drops problems check kind value filtered golden i d argv
  tmp="$scratch/$name"
  mkdir -p "$tmp"
  if [[ " ${fields[*]} " == *" needs=no-gpu "* ]] && nvidia-smi -L >/dev/null 2>&1; then
    printf 'skip  %-40s (a GPU is visible)\n' "$name" >"$scratch/$index.ok"
    echo "0 $name" >"$scratch/$index.time"
    return
  fi
  args=${args//\{tmp\}/$tmp}
  eval "argv=($args)"

  out="$scratch/$name.out"
  t0=$EPOCHREALTIME
  (cd "$src" && timeout "$case_seconds" "$bin" "${argv[@]}") >"$out" 2>&1 </dev/null
  rc=$?
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  # The scratch path differs per run; golden files name it {tmp}.
  sed -i "s|$tmp|{tmp}|g" "$out"

  problems=()
  if [ "$rc" = 124 ] && [ "$want" != 124 ]; then
    problems+=("still running after $case_seconds s (CASE_SECONDS): stopped")
  elif [ "$rc" != "$want" ]; then
    problems+=("exit code $rc, expected $want")
  fi

  patterned=0
  drops=()
  for ((i = 3; i < ${#fields[@]}; i++)); do
    check=$(trim "${fields[$i]}")
    kind=${check%%=*}
    value=${check#*=}
    # Paths name the scratch directory; patterns see the output, where it reads {tmp}.
    [[ $kind == file || $kind == nofile ]] && value=${value//\{tmp\}/$tmp}
    case $kind in
      drop) drops+=("$value") ;;
      needs) ;;
      expect)
        patterned=1
        grep -Eq -- "$value" "$out" || problems+=("output does not match /$value/")
        ;;
      reject)
        patterned=1
        grep -Eq -- "$value" "$out" && problems+=("output matches /$value/")
        ;;
      file)
        patterned=1
        [ -s "$value" ] || problems+=("file $value missing or empty")
        ;;
      nofile)
        patterned=1
        [ -e "$value" ] && problems+=("file $value should not exist")
        ;;
      *) problems+=("unknown check '$check'") ;;
    esac
  done

  if [ "$patterned" = 0 ]; then
    filtered="$scratch/$name.filtered"
    cp "$out" "$filtered"
    for d in "${drops[@]+"${drops[@]}"}"; do
      grep -Ev -- "$d" "$filtered" >"$filtered.tmp"
      mv "$filtered.tmp" "$filtered"
    done
    golden="$golden_dir/$name.txt"
    if [ "$update" = 1 ]; then
      mkdir -p "$golden_dir"
      cp "$filtered" "$golden"
    elif [ ! -f "$golden" ]; then
      problems+=("no golden file $golden (run with UPDATE_GOLDEN=1)")
    elif ! diff -u "$golden" "$filtered" >"$scratch/$name.diff"; then
      problems+=("output differs from $golden:"$'\n'"$(head -n 40 "$scratch/$name.diff")")
    fi
  fi

  echo "$took $name" >"$scratch/$index.time"
  if [ ${#problems[@]} -eq 0 ]; then
    printf 'ok    %-40s %6.1f s\n' "$name" "$took" >"$scratch/$index.ok"
  else
    {
      printf 'FAIL  %s  (perfsim %s; %.1f s)\n' "$name" "$args" "$took"
      for p in "${problems[@]}"; do echo "      $p"; done
      if [ "$patterned" = 1 ]; then
        echo "      output:"
        head -n 30 "$out" | sed 's/^/      | /'
      fi
    } >"$scratch/$index.fail"
  fi
}

index=0
running=0
while IFS= read -r raw || [ -n "$raw" ]; do
  line=$(trim "$raw")
  [ -z "$line" ] && continue
  [[ $line == \#* ]] && continue
  split_fields "$line "  # the space keeps an empty last field ("name | 2 |")
  name=$(trim "${fields[0]}")
  want=$(trim "${fields[1]:-0}")
  args=$(trim "${fields[2]:-}")
  [ -n "$only" ] && [[ $name != *$only* ]] && continue
  index=$((index + 1))
  run_case &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done <"$here/cases.txt"
wait

passed=0
failed=0
failures=()
for ((i = 1; i <= index; i++)); do
  if [ -f "$scratch/$i.ok" ]; then
    passed=$((passed + 1))
    cat "$scratch/$i.ok"
  else
    failed=$((failed + 1))
    failures+=("$(awk '{print $2}' "$scratch/$i.time" 2>/dev/null || echo "case $i")")
    cat "$scratch/$i.fail" 2>/dev/null || echo "FAIL  case $i: no verdict"
  fi
done
echo "cli golden: $passed passed, $failed failed ($jobs at a time); slowest:"
cat "$scratch"/*.time 2>/dev/null | sort -rn | head -n 3 | awk '{printf "  %6.1f s  %s\n", $1, $2}'
[ "$failed" -eq 0 ] || { echo "failed: ${failures[*]}"; exit 1; }
