#!/usr/bin/env bash
# Configures (once) and builds pf into build/. Extra arguments are passed to ninja
# (e.g. a target name). PF_BUILD_DIR picks another directory, PF_CMAKE_ARGS adds
# configure options (e.g. -DPF_SANITIZE=address,undefined; read only when the
# directory is first configured).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${PF_BUILD_DIR:-build}
# Paths below the checkout hash relatively, so clones elsewhere (CI) share
# the compiler cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  LAUNCHER=()
  command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${PF_BUILD_TYPE:-Release} \
    -DMLIR_DIR=${MLIR_DIR:-/usr/lib/llvm-22/lib/cmake/mlir} "${LAUNCHER[@]}" ${PF_CMAKE_ARGS:-}
fi
ninja -C "$BUILD_DIR" -j "${PF_JOBS:-$(nproc)}" "$@"
