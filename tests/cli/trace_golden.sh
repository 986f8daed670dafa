#!/usr/bin/env bash
# The trace of a small predicted run against its golden file (tests/cli/golden/trace_tiny_decode.json):
# every event, its track, times and args as the cost model placed them. The producer line (the
# version) is left out of the comparison. UPDATE_GOLDEN=1 writes the golden file instead.
#   tests/cli/trace_golden.sh PERFSIM SOURCE_DIR
set -uo pipefail
# No run here calibrates this machine or writes to the user's cache (cli/host_profile_cache.hpp).
export PERFSIM_NO_CACHE=1
perfsim=$1; cd "$2" || exit 1
golden=tests/cli/golden/trace_tiny_decode.json
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$perfsim" run tests/cli/tiny_decode.lua --backend none -q --trace "$tmp/trace.json" > /dev/null || exit 1
grep -v '"producer"' "$tmp/trace.json" > "$tmp/filtered.json"
if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then cp "$tmp/filtered.json" "$golden"; echo "updated $golden"; exit 0; fi
if ! diff -u "$golden" "$tmp/filtered.json" > "$tmp/diff.txt"; then
  echo "FAIL: the trace differs from $golden:"; head -40 "$tmp/diff.txt"; exit 1
fi
echo "trace golden: $(grep -c '"ph"' "$golden") events as expected"
