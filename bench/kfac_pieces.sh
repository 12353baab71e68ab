#!/usr/bin/env bash
# pf's K-FAC kernels (factor SYRK, damped Cholesky inverses, preconditioning
# GEMMs) against the bare OpenBLAS/LAPACK calls of the same work, same
# threads, on BERT-mini's and BERT-base's encoder linears at 1024 rows
# (batch 8 x 128). Issue 16's goal: each piece at >= 0.7 of the bare call's
# throughput (the last column). Not a test; nothing is asserted.
#   bench/kfac_pieces.sh [threads=2] [seconds per piece=1] [layer, e.g. base.ffn1]
# Needs build/lib/libpfrt.so (scripts/build.sh). OpenMP waits passively, as in
# pf-run and pf-train (lib/Runtime/cpu/WaitPolicy.cpp), unless OMP_WAIT_POLICY
# or GOMP_SPINCOUNT is set; the environment is otherwise left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=$(gcc -print-multiarch)
if [[ -z "${OMP_WAIT_POLICY:-}" && -z "${GOMP_SPINCOUNT:-}" ]]; then
  export OMP_WAIT_POLICY=passive
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
${CXX:-g++} -O2 -std=c++17 bench/kfac_pieces.cpp -Iinclude \
  -I/usr/include/$ARCH/openblas-openmp -o "$OUT/kfac_pieces" \
  -Lbuild/lib -Wl,-rpath,"$PWD/build/lib" -lpfrt \
  -L/usr/lib/$ARCH/openblas-openmp -Wl,-rpath,/usr/lib/$ARCH/openblas-openmp -lopenblas
echo "# $(date -u +'%F %H:%M') $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)," \
  "${1:-2} threads, load: $(cut -d' ' -f1-3 /proc/loadavg)," \
  "OPENBLAS_CORETYPE '${OPENBLAS_CORETYPE:-<unset>}', OMP_WAIT_POLICY '${OMP_WAIT_POLICY:-<unset>}'"
"$OUT/kfac_pieces" "${1:-2}" "${2:-1}" "${3:-}"
