#!/usr/bin/env bash
# Installs the Debian packages perfsim builds against, when any is missing.
set -euo pipefail
packages=(cmake g++ make pkg-config ninja-build libluajit-5.1-dev libfmt-dev libcli11-dev
          doctest-dev nlohmann-json3-dev libopenblas-dev
          openmpi-bin libopenmpi-dev  # ranks of parallel runs (mpirun)
          python3-matplotlib          # charts: perfsim plot, --plots (and their tests)
          clang libclang-rt-dev)      # clang: the sanitizer and fuzzing build (make test-sanitize)
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
