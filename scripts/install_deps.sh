#!/usr/bin/env bash
# Installs the Debian packages perfsim builds against, when any is missing.
#   scripts/install_deps.sh         everything: the build, the tests, charts, MPI ranks, clang
#   scripts/install_deps.sh run     what building and running perfsim needs (make run, make
#                                   install): no MPI, matplotlib or clang, minutes less on a
#                                   fresh machine; `make test` adds the rest
set -euo pipefail
packages=(cmake g++ make pkg-config ninja-build libluajit-5.1-dev libfmt-dev libcli11-dev
          doctest-dev nlohmann-json3-dev libopenblas-dev)
case "${1:-all}" in
  run) ;;
  all) packages+=(openmpi-bin libopenmpi-dev  # ranks of parallel runs (mpirun)
                  python3-matplotlib          # charts: perfsim plot, --plots (and their tests)
                  clang libclang-rt-dev) ;;   # clang: the sanitizer and fuzzing build (make test-sanitize)
  *) echo "usage: $0 [run|all]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "perfsim: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
