#!/usr/bin/env bash
# SGEMM GFLOP/s of OpenBLAS (OpenMP build), oneDNN (dnnl_sgemm) and BLIS
# (OpenMP build) side by side on BERT shapes, with the environment as it is
# and, for comparison, with OPENBLAS_CORETYPE=Haswell set for the OpenBLAS run
# only (what some CI machines carry). Not a test; nothing is asserted.
#   bench/gemm_libraries.sh [threads=2] [seconds per shape=0.5]
# OpenMP waits passively, as in pf-run and pf-train (lib/Runtime/cpu/WaitPolicy.cpp),
# unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set. Each figure is the best of the
# runs (median in parentheses): other processes only ever slow a run down.
# BLIS is optional (scripts/setup.sh --bench installs it); without it its
# column reads "-".
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-2}
SECONDS_PER_SHAPE=${2:-0.5}
ARCH=$(gcc -print-multiarch)
if [[ -z "${OMP_WAIT_POLICY:-}" && -z "${GOMP_SPINCOUNT:-}" ]]; then
  export OMP_WAIT_POLICY=passive
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

CXX=${CXX:-g++}
FLAGS=(-O2 -std=c++17 -fopenmp bench/gemm_libraries.cpp)
$CXX "${FLAGS[@]}" -DPF_BENCH_OPENBLAS -I/usr/include/$ARCH/openblas-openmp \
  -o "$OUT/openblas" -L/usr/lib/$ARCH/openblas-openmp \
  -Wl,-rpath,/usr/lib/$ARCH/openblas-openmp -lopenblas
$CXX "${FLAGS[@]}" -DPF_BENCH_DNNL -o "$OUT/onednn" -ldnnl
HAVE_BLIS=0
if [[ -f /usr/include/$ARCH/blis-openmp/blis.h ]]; then
  $CXX "${FLAGS[@]}" -DPF_BENCH_BLIS -I/usr/include/$ARCH/blis-openmp \
    -o "$OUT/blis" -L/usr/lib/$ARCH/blis-openmp \
    -Wl,-rpath,/usr/lib/$ARCH/blis-openmp -lblis
  HAVE_BLIS=1
fi

echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)," \
  "$THREADS threads, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# OPENBLAS_CORETYPE as-is: '${OPENBLAS_CORETYPE:-<unset>}'," \
  "OMP_WAIT_POLICY '${OMP_WAIT_POLICY:-<unset>}', GOMP_SPINCOUNT '${GOMP_SPINCOUNT:-<unset>}'"
# Shape by shape, the libraries one after the other, so that a change of the
# machine's load falls on all of them alike.
touch "$OUT/openblas.txt" "$OUT/openblas_haswell.txt" "$OUT/onednn.txt" "$OUT/blis.txt"
for shape in $("$OUT/openblas" --list); do
  "$OUT/openblas" "$THREADS" "$SECONDS_PER_SHAPE" "$shape" >>"$OUT/openblas.txt"
  OPENBLAS_CORETYPE=Haswell "$OUT/openblas" "$THREADS" "$SECONDS_PER_SHAPE" "$shape" \
    >>"$OUT/openblas_haswell.txt"
  "$OUT/onednn" "$THREADS" "$SECONDS_PER_SHAPE" "$shape" >>"$OUT/onednn.txt"
  if ((HAVE_BLIS)); then
    "$OUT/blis" "$THREADS" "$SECONDS_PER_SHAPE" "$shape" >>"$OUT/blis.txt"
  fi
done

python3 - "$OUT" <<'PY'
import sys
out = sys.argv[1]
def read(name):
    rows = {}
    for line in open(f"{out}/{name}.txt"):
        lib, shape, trans, m, n, k, batch, best, median = line.split()
        rows[shape] = (trans, m, n, k, batch, float(best), float(median))
    return rows
ob, obh, dn = read("openblas"), read("openblas_haswell"), read("onednn")
bl = read("blis")
def cell(rows, shape):
    if shape not in rows:
        return "-"
    return f"{rows[shape][5]:.0f} ({rows[shape][6]:.0f})"
print("| shape | op | M x N x K (x batch) | OpenBLAS | OpenBLAS, CORETYPE=Haswell"
      " | oneDNN | BLIS | oneDNN / OpenBLAS (best) |")
print("|---|---|---|---|---|---|---|---|")
for shape, (trans, m, n, k, batch, best, _) in ob.items():
    dims = f"{m} x {n} x {k}" + (f" x {batch}" if batch != "1" else "")
    print(f"| {shape} | {trans} | {dims} | {cell(ob, shape)} | {cell(obh, shape)} | "
          f"{cell(dn, shape)} | {cell(bl, shape)} | {dn[shape][5] / best:.2f} |")
PY
