#!/usr/bin/env bash
# Hostile scripts and inputs (docs/RELIABILITY.md, "Hostile scripts"): each case must end with a
# non-zero exit, a first line "perfsim: error: ..." saying what happened, within its time bound,
# with nothing written outside the places a script may write and nothing read from outside the
# places it may read (a secret file beside the scratch directory must never reach the output).
#
#   tests/cli/hostile.sh PERFSIM_BIN [CASE_SUBSTRING]
#
# Cases run from $scratch/outside (the working directory a victim would run in), the scripts
# live in $scratch/scripts.
set -uo pipefail
# No run here calibrates this machine or writes to the user's cache (cli/host_profile_cache.hpp).
export PERFSIM_NO_CACHE=1

if [ $# -lt 1 ]; then
  echo "usage: $0 PERFSIM_BIN [CASE_SUBSTRING]" >&2
  exit 2
fi
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
only=${2:-}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
s="$scratch/scripts" out="$scratch/outside"
mkdir -p "$s" "$out"
echo TOPSECRET >"$out/secret.txt"
echo TOPSECRET >"$out/4242"
echo "keep" >"$out/victim.txt"

tiny='model = model("gpt2"), hardware = "H100-SXM", workload = decode { batch = 1, prompt = 16, new_tokens = 8 }'
write() { cat >"$s/$1"; }

# --- reaching the unwrapped library functions, the registry, native code ---
write getupvalue.lua <<EOF
local n, open = debug.getupvalue(io.open, 1)
print(open("$out/secret.txt"):read("*a"))
EOF
write getregistry.lua <<'EOF'
debug.getregistry()["perfsim.context"] = nil
EOF
write getfenv_open.lua <<EOF
local env = getfenv(io.open)
print(env.io.open("$out/secret.txt"))
EOF
write jit_util.lua <<'EOF'
local util = require "jit.util"
print(util.funcinfo(print))
EOF
write jit_on.lua <<'EOF'
jit.on()
while true do end
EOF
write ffi.lua <<'EOF'
local ffi = require "ffi"
EOF
write string_buffer.lua <<'EOF'
local buffer = require "string.buffer"
EOF
# --- bytecode ---
write dump.lua <<'EOF'
local f = load(string.dump(function() return 1 end))
EOF
write load_bytecode.lua <<'EOF'
local chunk, message = load("\27LJ\2\0\0\0\0\0")
if not chunk then error(message) end
chunk()
EOF
printf '\033LJ\002\012\000\001\000\377\377' >"$s/bytecode_scenario.lua"
# --- file names that skip the checks, files outside, special files ---
write number_name.lua <<'EOF'
for line in io.lines(4242) do print(line) end
EOF
write read_outside.lua <<EOF
print(io.open("$out/secret.txt"):read("*a"))
EOF
write loadfile_outside.lua <<EOF
print(loadfile("$out/secret.txt"))
EOF
write profile_outside.lua <<EOF
return scenario { name = "s", model = model("gpt2"), hardware = profile("$out/secret.txt"),
                  workload = decode { batch = 1, prompt = 16, new_tokens = 8 } }
EOF
write write_file.lua <<EOF
local f = io.open("$out/written.txt", "w")
EOF
write io_output.lua <<EOF
io.output("$out/written.txt")
io.write("x")
EOF
write tmpfile.lua <<'EOF'
local f = io.tmpfile()
EOF
write trace_outside.lua <<EOF
return scenario { name = "s", model = model("tiny-llama"), hardware = "H100-SXM",
                  workload = serve { requests = 5, arrivals = trace "$out/secret.txt" } }
EOF
write trace_dev_zero.lua <<'EOF'
return scenario { name = "s", model = model("tiny-llama"), hardware = "H100-SXM",
                  workload = serve { requests = 5, arrivals = trace "/dev/zero" } }
EOF
mkfifo "$s/fifo.jsonl"
write trace_fifo.lua <<'EOF'
return scenario { name = "s", model = model("tiny-llama"), hardware = "H100-SXM",
                  workload = serve { requests = 5, arrivals = trace "fifo.jsonl" } }
EOF
write lengths_fifo.lua <<'EOF'
return scenario { name = "s", model = model("tiny-llama"), hardware = "H100-SXM",
                  workload = serve { requests = 5, arrivals = poisson { rate = 1 },
                                     prompt = { dist = "file", file = "fifo.jsonl" } } }
EOF
write io_open_fifo.lua <<EOF
local f = io.open("$s/fifo.jsonl")
EOF
write perfsim_write_link.lua <<'EOF'
perfsim.write("link/escape.txt", "x")
EOF
# --- time: loops the count hook cannot stop ---
write xpcall_handler_loop.lua <<'EOF'
xpcall(function() error("x") end, function() while true do end end)
EOF
write pcall_loop.lua <<'EOF'
while true do pcall(function() while true do end end) end
EOF
write gc_loop.lua <<'EOF'
local p = newproxy(true)
getmetatable(p).__gc = function() while true do end end
EOF
write find_backtracking.lua <<'EOF'
print(string.find(string.rep("a", 64), "a-a-a-a-a-a-a-a-a-a-a-a-a-a-b"))
EOF
write predict_loop.lua <<'EOF'
local s = scenario { name = "s", model = model("llama-3-8b"), hardware = "H100-SXM",
                     workload = serve { requests = 1000000, arrivals = poisson { rate = 50 } } }
perfsim.predict(s)
EOF
write loop_profile.lua <<'EOF'
while true do end
EOF
write find_profile.lua <<'EOF'
local x = string.find(string.rep("a", 64), "a-a-a-a-a-a-a-a-a-a-a-a-a-a-b")
EOF
# --- the C stack: recursion through C functions ---
write coroutine_recursion.lua <<'EOF'
local function f() return coroutine.wrap(f)() end
f()
EOF
write gsub_recursion.lua <<'EOF'
local function f(s) return (s:gsub(".", f)) end
f("ab")
EOF
write sort_recursion.lua <<'EOF'
local function f() local t = {3, 2, 1} table.sort(t, function(a, b) f() return a < b end) end
f()
EOF
write tostring_recursion.lua <<'EOF'
local t = setmetatable({}, {__tostring = function(self) return tostring(self) end})
print(tostring(t))
EOF
# --- memory ---
write concat_bomb.lua <<'EOF'
local s = string.rep("x", 2^30)
local t = s .. s
local u = t .. t
print(#u)
EOF
write rep_bomb.lua <<'EOF'
local s = string.rep("x", 2^31 - 1)
EOF
write table_bomb.lua <<'EOF'
local t = {}
for i = 1, 1e9 do t[i] = {i, i, i, i} end
EOF
# --- sizes ---
write gpus_huge.lua <<EOF
return scenario { name = "s", $tiny, parallel = { gpus = 2^40 } }
EOF
write sweep_huge.lua <<EOF
local batches, prompts = {}, {}
for i = 1, 1000 do batches[i] = i; prompts[i] = 16 * i end
return scenario { name = "s", $tiny, sweep = { batch = batches, prompt = prompts } }
EOF
write requests_huge.lua <<'EOF'
return scenario { name = "s", model = model("tiny-llama"), hardware = "H100-SXM",
                  workload = serve { requests = 1e7, arrivals = poisson { rate = 1 } } }
EOF
write repeats_huge.lua <<EOF
return scenario { name = "s", $tiny, execute = { repeats = 1e9 } }
EOF
write tiny.lua <<EOF
return scenario { name = "s", $tiny }
EOF
write gemm_list_profile.lua <<'EOF'
return profile { base = "H100-SXM", name = "x", gemm = {1, 2, 3} }
EOF
ln -s "$out/secret.txt" "$s/leak.lua"  # a module beside the script that is a link to outside
echo 'require "leak"' >"$s/require_link.lua"
mkdir -p "$s/writes"
ln -s "$out" "$s/writes/link"  # a link inside --output-dir that leads outside

# NAME | ARGUMENTS (from $out; {s} is the scripts directory) | first-line regex | seconds at most
cases=(
  "getupvalue|run {s}/getupvalue.lua --backend none|debug.getupvalue is not available to scripts|10"
  "getregistry|run {s}/getregistry.lua --backend none|debug.getregistry is not available to scripts|10"
  "getfenv_open|run {s}/getfenv_open.lua --backend none|io.open\\('.*secret.txt'\\): scripts may read only|10"
  "jit_util|run {s}/jit_util.lua --backend none|module 'jit.util' is not available to scripts|10"
  "jit_on|run {s}/jit_on.lua --backend none --timeout 2|attempt to index global 'jit'|10"
  "ffi|run {s}/ffi.lua --backend none|module 'ffi' is not available to scripts|10"
  "string_buffer|run {s}/string_buffer.lua --backend none|module 'string.buffer' is not available|10"
  "string_dump|run {s}/dump.lua --backend none|string.dump is not available to scripts|10"
  "load_bytecode|run {s}/load_bytecode.lua --backend none|load: compiled Lua bytecode is refused|10"
  "bytecode_scenario|run {s}/bytecode_scenario.lua --backend none|bytecode_scenario.lua: compiled Lua bytecode is refused|10"
  "bytecode_profile|run {s}/tiny.lua --backend none --profile {s}/bytecode_scenario.lua|compiled Lua bytecode is refused|10"
  "number_name|run {s}/number_name.lua --backend none|io.lines\\('4242'\\): scripts may read only|10"
  "read_outside|run {s}/read_outside.lua --backend none|io.open\\('.*secret.txt'\\): scripts may read only|10"
  "loadfile_outside|run {s}/loadfile_outside.lua --backend none|loadfile\\('.*secret.txt'\\): scripts may read only|10"
  "profile_outside|run {s}/profile_outside.lua --backend none|profile\\('.*secret.txt'\\): scripts may read only|10"
  "write_file|run {s}/write_file.lua --backend none|io.open\\('.*written.txt', 'w'\\): scripts cannot write files|10"
  "io_output|run {s}/io_output.lua --backend none|io.output\\(.*written.txt\\): scripts cannot write files|10"
  "tmpfile|run {s}/tmpfile.lua --backend none|io.tmpfile is not available to scripts|10"
  "require_link|run {s}/require_link.lua --backend none|require\\('.*leak.lua'\\): scripts may read only|10"
  "trace_outside|run {s}/trace_outside.lua --backend none|trace\\('.*secret.txt'\\): scripts may read only|10"
  "trace_dev_zero|run {s}/trace_dev_zero.lua --backend none|trace\\('/dev/zero'\\): scripts may read only|10"
  "trace_fifo|run {s}/trace_fifo.lua --backend none|trace\\('.*fifo.jsonl'\\): not a regular file|10"
  "lengths_fifo|run {s}/lengths_fifo.lua --backend none|lengths file\\('.*fifo.jsonl'\\): not a regular file|10"
  "io_open_fifo|run {s}/io_open_fifo.lua --backend none|io.open\\('.*fifo.jsonl'\\): not a regular file|10"
  "perfsim_write_link|run {s}/perfsim_write_link.lua --backend none --output-dir {s}/writes|leads outside --output-dir|10"
  "xpcall_handler_loop|run {s}/xpcall_handler_loop.lua --backend none --timeout 1|ran longer than --timeout 1 s|10"
  "pcall_loop|run {s}/pcall_loop.lua --backend none --timeout 1|ran longer than --timeout 1 s|10"
  "gc_loop|run {s}/gc_loop.lua --backend none --timeout 1|newproxy is not available to scripts|10"
  "find_backtracking|run {s}/find_backtracking.lua --backend none --timeout 1|find_backtracking.lua:1: script ran longer than --timeout 1 s and could not be stopped there|10"
  "predict_loop|run {s}/predict_loop.lua --backend none --timeout 1|predict_loop.lua:3: script ran longer than --timeout 1 s|10"
  "loop_profile|run {s}/tiny.lua --backend none --profile {s}/loop_profile.lua|a profile or catalog file ran longer than 10 s|20"
  "find_profile|run {s}/tiny.lua --backend none --profile {s}/find_profile.lua|a profile or catalog file ran longer than 10 s and could not be stopped there|20"
  "repeats_set|run {s}/repeats_huge.lua --backend cpu|execute.repeats must be between 1 and 10000|10"
  "run_timeout|run {s}/tiny.lua --backend cpu --run-timeout 0.001|ran longer than --run-timeout 0.001 s|10"
  "coroutine_recursion|run {s}/coroutine_recursion.lua --backend none|attempt to index global 'coroutine'|10"
  "gsub_recursion|run {s}/gsub_recursion.lua --backend none|stack overflow|30"
  "sort_recursion|run {s}/sort_recursion.lua --backend none|stack overflow|30"
  "tostring_recursion|run {s}/tostring_recursion.lua --backend none --timeout 2|tostring_recursion.lua:1: |10"
  "concat_bomb|run {s}/concat_bomb.lua --backend none|script used more than 2048 MiB of memory|30"
  "rep_bomb|run {s}/rep_bomb.lua --backend none|script used more than 2048 MiB of memory|30"
  "table_bomb|run {s}/table_bomb.lua --backend none|script used more than 2048 MiB of memory|60"
  "gpus_huge|run {s}/gpus_huge.lua --backend none|parallel.gpus = 1099511627776 is out of range|10"
  "sweep_huge|run {s}/sweep_huge.lua --backend none|sweep has more than 100,000 points \\(1000 batch x 1000 prompt\\)|10"
  "requests_huge|run {s}/requests_huge.lua --backend none|serve.requests must be between 1 and 1000000|10"
  "gemm_list_profile|run {s}/tiny.lua --backend none --profile {s}/gemm_list_profile.lua|gemm holds an unnamed entry|10"
  "dev_null|run /dev/null --backend none|cannot read script '/dev/null': not a regular file|10"
  "fifo_scenario|run {s}/fifo.jsonl --backend none|cannot read script '.*fifo.jsonl': not a regular file|10"
  "search_gpus_zero|search {s}/tiny.lua --gpus 0|--gpus: Value 0 not in range|10"
  "search_threads_negative|search {s}/tiny.lua --gpus 2 --threads -1|--threads: Value -1 not in range|10"
)

passed=0 failed=0
touch "$scratch/stamp"
for c in "${cases[@]}"; do
  IFS='|' read -r name args pattern bound <<<"$c"
  [ -n "$only" ] && [[ $name != *$only* ]] && continue
  args=${args//\{s\}/$s}
  read -r -a argv <<<"$args"
  t0=$EPOCHREALTIME
  (cd "$out" && timeout $((bound + 30)) "$bin" "${argv[@]}") >"$scratch/out.txt" 2>&1 </dev/null
  rc=$?
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  first=$(grep -m1 '^perfsim: error: ' "$scratch/out.txt")
  problems=()
  [ "$rc" -ne 0 ] || problems+=("exit code 0")
  [ "$rc" -ne 124 ] || problems+=("still running after $((bound + 30)) s: killed")
  [ "$rc" -lt 128 ] || problems+=("ended by signal $((rc - 128))")
  [ -n "$first" ] || problems+=("no 'perfsim: error:' line")
  echo "$first" | grep -Eq -- "$pattern" || problems+=("first error line does not match /$pattern/")
  awk -v t="$took" -v b="$bound" 'BEGIN { exit !(t <= b) }' || problems+=("took $took s, over $bound s")
  grep -q TOPSECRET "$scratch/out.txt" && problems+=("the secret file's content reached the output")
  written=$(find "$out" -newer "$scratch/stamp" -type f | head -3)
  [ -z "$written" ] || problems+=("wrote outside: $written")
  [ "$(cat "$out/victim.txt")" = keep ] || problems+=("victim.txt changed")
  if [ ${#problems[@]} -eq 0 ]; then
    passed=$((passed + 1))
    printf 'ok    %-26s %5.1f s  %s\n' "$name" "$took" "$(echo "$first" | cut -c1-110)"
  else
    failed=$((failed + 1))
    printf 'FAIL  %s (perfsim %s; %s s, exit %s)\n' "$name" "$args" "$took" "$rc"
    for p in "${problems[@]}"; do echo "      $p"; done
    head -n 8 "$scratch/out.txt" | sed 's/^/      | /'
  fi
done

# --- outputs: planted links, concurrent writers, interrupted writes ---
output_case() {  # NAME: runs the function output_NAME, which echoes problems
  local name=$1
  [ -n "$only" ] && [[ $name != *$only* ]] && return
  local problems
  problems=$("output_$name")
  if [ -z "$problems" ]; then
    passed=$((passed + 1))
    printf 'ok    %-26s\n' "$name"
  else
    failed=$((failed + 1))
    printf 'FAIL  %s\n%s\n' "$name" "$(echo "$problems" | sed 's/^/      /')"
  fi
}
output_planted_tmp_link() {
  local dir="$scratch/o1"
  mkdir -p "$dir"
  ln -s "$out/victim.txt" "$dir/report.json.tmp"
  (cd "$out" && "$bin" run "$s/tiny.lua" --backend none -q -o "$dir/report.json") >/dev/null 2>&1 || echo "run failed"
  [ "$(cat "$out/victim.txt")" = keep ] || echo "the planted link's target was written"
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/report.json" 2>/dev/null || echo "report.json is not valid JSON"
}
output_concurrent_writers() {
  local dir="$scratch/o2" i
  mkdir -p "$dir"
  for i in 1 2 3 4; do
    (cd "$out" && "$bin" run "$s/tiny.lua" --backend none -q -o "$dir/report.json" >/dev/null 2>&1) &
  done
  wait
  python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/report.json" 2>/dev/null || echo "report.json is not valid JSON"
  ls "$dir" | grep -q '\.tmp$' && echo "temporary files left: $(ls "$dir")"
}
output_interrupted_writes() {
  local dir="$scratch/o3" i pid
  mkdir -p "$dir"
  echo keep >"$dir/report.json"
  for i in 1 2 3 4 5 6; do
    (cd "$out" && exec "$bin" run "$s/sweep_small.lua" --backend none -q -o "$dir/report.json" >/dev/null 2>&1) &
    pid=$!
    sleep "0.$((i * 15))"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  ls "$dir" | grep -q '\.tmp$' && echo "temporary files left: $(ls "$dir")"
  if [ "$(cat "$dir/report.json")" != keep ]; then
    python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$dir/report.json" 2>/dev/null ||
      echo "report.json is neither the old file nor a valid report"
  fi
}
write sweep_small.lua <<EOF
local batches = {}
for i = 1, 200 do batches[i] = i end
return scenario { name = "s", $tiny, sweep = { batch = batches } }
EOF
if command -v python3 >/dev/null; then
  output_case planted_tmp_link
  output_case concurrent_writers
  output_case interrupted_writes
fi

echo "hostile: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
