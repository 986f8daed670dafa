#!/usr/bin/env bash
# `run --trace FILE --plots DIR`: the timeline chart is drawn from the trace written beside the
# report, with no "needs a trace" note. Skipped (77) where no python3 has matplotlib.
#   tests/cli/plots_trace.sh PERFSIM_BIN SOURCE_DIR
set -uo pipefail
# No run here calibrates this machine or writes to the user's cache (cli/host_profile_cache.hpp).
export PERFSIM_NO_CACHE=1
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
cd "$2" || exit 1
found=
for py in ${PERFSIM_PYTHON:-python3 /usr/bin/python3}; do
  "$py" -c 'import matplotlib' 2>/dev/null && found=1 && break
done
[ -n "$found" ] || { echo "plots_trace: skipped: no python3 with matplotlib"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$("$bin" run tests/cli/tiny_decode.lua --backend none --trace "$tmp/t.json" --plots "$tmp/charts" 2>&1 >/dev/null)
rc=$?
fail() { echo "plots_trace: $*"; echo "$out"; exit 1; }
[ $rc -eq 0 ] || fail "exit $rc"
grep -q "needs a trace" <<<"$out" && fail "--trace was given, yet the timeline was skipped for want of one"
[ -s "$tmp/charts/timeline.svg" ] || fail "no timeline.svg drawn from the trace"
[ -s "$tmp/charts/timeline.png" ] || fail "no timeline.png drawn from the trace"
# Without --trace the note stays: the report alone holds no timeline.
out=$("$bin" run tests/cli/tiny_decode.lua --backend none --plots "$tmp/plain" 2>&1 >/dev/null)
grep -q "skipped timeline: it needs a trace" <<<"$out" || fail "without --trace, no note that the timeline needs one"
echo "plots_trace: the timeline comes from --trace"
