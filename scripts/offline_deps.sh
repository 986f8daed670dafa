#!/usr/bin/env bash
# Dependencies for a machine without a package registry (e.g. a GPU box).
#   scripts/offline_deps.sh download          on a Debian machine: fetch the .debs into .deps/debs
#   scripts/offline_deps.sh unpack [PREFIX]   on the target: unpack them under PREFIX (default
#                                             /tmp/perfsim-deps) and print the environment to use
#   scripts/offline_deps.sh build [PREFIX]    unpack, then configure and build into build-offline
# Nothing is installed system-wide: packages are unpacked with dpkg -x into PREFIX.
set -euo pipefail
cd "$(dirname "$0")/.."
debs=.deps/debs
packages=(libluajit-5.1-dev libluajit-5.1-2 libluajit-5.1-common libfmt-dev libfmt9 libcli11-dev
          doctest-dev nlohmann-json3-dev libopenblas-dev libopenblas0 libopenblas0-pthread
          libopenblas-pthread-dev libgfortran5
          openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libevent-core-2.1-7
          libevent-pthreads-2.1-7 libhwloc15 libmunge2 libpmix2 libnuma1)

env_for() {
  local p=$1 lib=$1/usr/lib/x86_64-linux-gnu
  echo "export PERFSIM_DEPS=$p"
  echo "export CMAKE_PREFIX_PATH=$p/usr"
  echo "export PKG_CONFIG_PATH=$lib/pkgconfig:$p/usr/share/pkgconfig"
  echo "export PKG_CONFIG_SYSROOT_DIR=$p"
  echo "export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$lib/openmpi/lib:${LD_LIBRARY_PATH:-}"
  # OpenMPI unpacked away from /usr: OPAL_PREFIX relocates it (and its mpicc wrapper, which
  # CMake's FindMPI asks), PMIx likewise; mpirun and orted come from PATH.
  echo "export OPAL_PREFIX=$p/usr"
  echo "export PMIX_INSTALL_PREFIX=$p/usr"
  echo "export PATH=$p/usr/bin:$PATH"
}

case "${1:-}" in
  download)
    mkdir -p "$debs"
    (cd "$debs" && apt-get download "${packages[@]}")
    ls -la "$debs"
    ;;
  unpack)
    prefix=${2:-/tmp/perfsim-deps}
    mkdir -p "$prefix"
    for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
    # Debian's openblas .pc and .so live in an alternatives folder; expose them where the
    # pkg-config file points.
    lib=$prefix/usr/lib/x86_64-linux-gnu
    [ -e "$lib/pkgconfig/openblas.pc" ] || ln -sf "$lib/openblas-pthread/pkgconfig/openblas-pthread.pc" "$lib/pkgconfig/openblas.pc" 2>/dev/null || true
    [ -e "$lib/libopenblas.so" ] || ln -sf "$lib/openblas-pthread/libopenblas.so" "$lib/libopenblas.so" 2>/dev/null || true
    [ -e "$lib/libluajit-5.1.so" ] || ln -sf libluajit-5.1.so.2 "$lib/libluajit-5.1.so"
    # OpenMPI's commands are Debian alternatives (made by its install scripts): link them.
    for c in mpirun mpiexec mpicc mpicxx; do
      [ -e "$prefix/usr/bin/$c.openmpi" ] && ln -sf "$c.openmpi" "$prefix/usr/bin/$c"
    done
    env_for "$prefix"
    ;;
  build)
    prefix=${2:-/tmp/perfsim-deps}
    eval "$("$0" unpack "$prefix")"
    gen=""; command -v ninja >/dev/null && gen="-G Ninja"
    cmake -S . -B build-offline $gen -DCMAKE_BUILD_TYPE=Release
    cmake --build build-offline -j "$(nproc)"
    ;;
  *)
    sed -n '2,7p' "$0"; exit 2 ;;
esac
