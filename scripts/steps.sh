# Sourced by the GPU scripts: run named steps with their output in "$LOGS/<file>", remember
# each result, and print them as a table at the end.
#   step NAME LOGFILE COMMAND...   runs COMMAND; on failure prints the log's tail, returns rc
#   record NAME RESULT             adds a row by hand
#   summary                        prints the table
#   require_gpus SCRIPT [MIN]      exits 2 unless nvidia-smi sees MIN GPUs (default 1); records them
#   use_deps                       the system's libraries, else the offline .debs (.deps/debs)
declare -a names=() results=()
record() { names+=("$1"); results+=("$2"); }
step() {
  local name=$1 log=$2; shift 2
  local t0=$SECONDS rc=0
  "$@" >"$LOGS/$log" 2>&1 || rc=$?
  if [ $rc -eq 0 ]; then record "$name" "ok ($((SECONDS - t0)) s, $LOGS/$log)"; return 0; fi
  record "$name" "FAILED rc=$rc ($((SECONDS - t0)) s, $LOGS/$log)"
  tail -30 "$LOGS/$log"
  return $rc
}
summary() {
  echo
  echo "| step | result |"
  echo "|---|---|"
  for i in "${!names[@]}"; do echo "| ${names[$i]} | ${results[$i]} |"; done
}

require_gpus() {
  local script=$1 min=${2:-1} count
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >"$LOGS/gpus.log" 2>&1; then
    echo "$script: no GPU visible (nvidia-smi failed): this script is for a GPU machine" >&2
    exit 2
  fi
  count=$(grep -c '^GPU ' "$LOGS/gpus.log")
  if [ "$count" -lt "$min" ]; then
    echo "$script: $count GPU(s) visible; it needs $min or more" >&2
    exit 2
  fi
  record "gpus" "$count x $(head -1 "$LOGS/gpus.log" | sed 's/ (UUID.*//; s/^GPU 0: //')"
}
use_deps() {
  if pkg-config --exists luajit openblas 2>/dev/null; then
    record deps "system"
  elif [ -d .deps/debs ]; then
    eval "$(scripts/offline_deps.sh unpack "${PERFSIM_DEPS:-/tmp/perfsim-deps}")"
    record deps "offline .debs unpacked under $PERFSIM_DEPS"
  else
    record deps "MISSING: install them (scripts/install_deps.sh) or copy .deps/debs here"
  fi
}
