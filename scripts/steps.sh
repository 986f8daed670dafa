# Sourced by the GPU scripts: run named steps with their output in "$LOGS/<file>", remember
# each result, and print them as a table at the end.
#   step NAME LOGFILE COMMAND...   runs COMMAND; on failure prints the log's tail, returns rc
#   record NAME RESULT             adds a row by hand
#   summary                        prints the table
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
