#!/usr/bin/env bash
# The progress line on a terminal (a pseudo-terminal from script(1)): `perfsim run` redraws one
# line per stack step with carriage returns, and with its output piped or with --quiet it writes
# no progress at all.
#   tests/cli/progress_tty.sh PERFSIM SOURCE_DIR
set -uo pipefail
# No run here calibrates this machine or writes to the user's cache (cli/host_profile_cache.hpp).
export PERFSIM_NO_CACHE=1
perfsim=$1; cd "$2" || exit 1
command -v script >/dev/null || { echo "script(1) not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
scenario=tests/cli/tiny_decode.lua
script -qec "$perfsim run $scenario --backend cpu -o $tmp/a.json" /dev/null > "$tmp/tty.txt" 2>&1
fail=0
grep -q $'\r\033\\[Krun: \\[4/4\\] +fp8' "$tmp/tty.txt" || { echo "FAIL: no redrawn progress line on a terminal"; fail=1; }
grep -q "ETA" "$tmp/tty.txt" || { echo "FAIL: no ETA on a terminal"; fail=1; }
script -qec "$perfsim run $scenario --backend cpu -q -o $tmp/b.json" /dev/null > "$tmp/quiet.txt" 2>&1
grep -q "run: \\[" "$tmp/quiet.txt" && { echo "FAIL: progress with --quiet"; fail=1; }
"$perfsim" run $scenario --backend cpu -o "$tmp/c.json" > "$tmp/piped.txt" 2>&1
grep -q "run: \\[" "$tmp/piped.txt" && { echo "FAIL: progress when piped"; fail=1; }
[ "$fail" = 0 ] && echo "progress line: drawn on a terminal, quiet when piped or with --quiet"
exit "$fail"
