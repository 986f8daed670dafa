#!/usr/bin/env bash
# The installed layout: `cmake --install` into a scratch prefix, then the installed perfsim run
# from another directory finds its stdlib (list models), the validation suite (a
# prediction-only validate of saved measurements) and the shipped scenarios.
#   tests/install/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix
fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
bin=$prefix/bin/perfsim
[ -x "$bin" ] || fail "no $bin after cmake --install"
for d in scenarios/validation scenarios/validation_ranks examples stdlib; do
  [ -d "$prefix/share/perfsim/$d" ] || fail "no share/perfsim/$d after cmake --install"
done

# Somewhere with no perfsim files, so nothing resolves against the working directory.
mkdir "$scratch/elsewhere"
cd "$scratch/elsewhere"
"$bin" list models | grep -q '^  llama-3-8b' || fail "perfsim list models does not list llama-3-8b"
"$bin" validate --help | grep -q -- '--suite' || fail "perfsim validate --help does not describe --suite"
# The default suite resolves to the installed share/perfsim/scenarios/validation.
out=$("$bin" validate --measurements "$src/tests/cli/h100_validation.json" --profile h100-local -q 2>&1) \
  || fail "validate from another directory failed: $out"
grep -q "share/perfsim/scenarios/validation" <<<"$out" || fail "validate did not use the installed suite: $out"
# A shipped scenario by its relative name, predicted only.
"$bin" run scenarios/llm_decode.lua --backend none -q | grep -q '^scenario  llm_decode' \
  || fail "perfsim run scenarios/llm_decode.lua does not find the installed scenario"
"$bin" run scenarios/llm_decode.lua --help | grep -q '^Options declared by .*scenarios/llm_decode.lua' \
  || fail "perfsim run scenarios/llm_decode.lua --help does not list the installed scenario's options"
echo "install_test: installed into a scratch prefix; list, validate and run work from another directory"
