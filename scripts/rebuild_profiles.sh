#!/usr/bin/env bash
# Rebuilds the shipped calibrated profiles (stdlib/profiles/NAME.lua) from the calibration
# points they were merged from, with `perfsim calibrate --merge`:
#   tests/profiles/NAME/points.txt   the points files (gzipped CSV, `calibrate --points`), in merge order
#   tests/profiles/NAME/base.lua.gz  the profile whose launch, host dispatch and link figures the merge keeps
# The provenance comment under the tool's four header lines is taken from the shipped file.
#
#   scripts/rebuild_profiles.sh [--check] PERFSIM [SOURCE_DIR]
#
# --check compares each rebuilt profile with the shipped one and fails on any difference (the
# test suite runs it); without it the shipped files are written. docs/CALIBRATION.md says what
# each points file holds.
set -euo pipefail

check=0
if [[ "${1:-}" == "--check" ]]; then
  check=1
  shift
fi
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 [--check] PERFSIM [SOURCE_DIR]" >&2
  exit 2
fi
perfsim=$1
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
[[ -x "$perfsim" ]] || { echo "$0: $perfsim is not an executable perfsim" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for dir in "$src"/tests/profiles/*/; do
  name=$(basename "$dir")
  work="$tmp/$name"
  mkdir -p "$work"
  files=()
  while read -r f; do
    [[ -z "$f" ]] && continue
    gzip -dc "$dir/$f" > "$work/${f%.gz}"
    files+=("$work/${f%.gz}")
  done < "$dir/points.txt"
  gzip -dc "$dir/base.lua.gz" > "$work/base.lua"
  "$perfsim" calibrate --merge "${files[@]}" --profile "$work/base.lua" --name "$name" -o "$work/merged.lua" -q \
    > "$work/merge.log"
  shipped="$src/stdlib/profiles/$name.lua"
  # The tool's header (4 comment lines), the shipped file's provenance comment (its lines 5 up
  # to `return profile {`), then the rest of the merge.
  {
    head -n 4 "$work/merged.lua"
    [[ -f "$shipped" ]] && awk 'NR > 4 && /^return profile \{/ { exit } NR > 4' "$shipped"
    tail -n +5 "$work/merged.lua"
  } > "$work/rebuilt.lua"
  if [[ $check == 1 ]]; then
    if cmp -s "$work/rebuilt.lua" "$shipped"; then
      echo "ok    $name: stdlib/profiles/$name.lua rebuilt from tests/profiles/$name"
    else
      echo "FAIL  $name: the merge of tests/profiles/$name differs from stdlib/profiles/$name.lua:"
      diff "$shipped" "$work/rebuilt.lua" | head -20 || true
      status=1
    fi
  else
    cp "$work/rebuilt.lua" "$shipped"
    echo "wrote stdlib/profiles/$name.lua"
  fi
done
exit $status
