#!/usr/bin/env bash
# SGEMM GFLOP/s of OpenBLAS (OpenMP build), oneDNN (dnnl_sgemm) and BLIS
# (OpenMP build) side by side on BERT shapes, with the environment as it is
# and, for comparison, with OPENBLAS_CORETYPE=Haswell set for the OpenBLAS run
# only (what some CI machines carry). Not a test; nothing is asserted.
#   bench/gemm_libraries.sh [threads=2] [seconds per shape=0.5]
# BLIS is optional (scripts/setup.sh --bench installs it); without it its
# column reads "-".
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-2}
SECONDS_PER_SHAPE=${2:-0.5}
ARCH=$(gcc -print-multiarch)
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
echo "# OPENBLAS_CORETYPE as-is: '${OPENBLAS_CORETYPE:-<unset>}'"
"$OUT/openblas" "$THREADS" "$SECONDS_PER_SHAPE" >"$OUT/openblas.txt"
OPENBLAS_CORETYPE=Haswell "$OUT/openblas" "$THREADS" "$SECONDS_PER_SHAPE" \
  >"$OUT/openblas_haswell.txt"
"$OUT/onednn" "$THREADS" "$SECONDS_PER_SHAPE" >"$OUT/onednn.txt"
if ((HAVE_BLIS)); then
  "$OUT/blis" "$THREADS" "$SECONDS_PER_SHAPE" >"$OUT/blis.txt"
fi

python3 - "$OUT" "$HAVE_BLIS" <<'PY'
import sys
out, have_blis = sys.argv[1], sys.argv[2] == "1"
def read(name):
    rows = {}
    for line in open(f"{out}/{name}.txt"):
        lib, shape, trans, m, n, k, batch, gflops = line.split()
        rows[shape] = (trans, m, n, k, batch, float(gflops))
    return rows
ob, obh, dn = read("openblas"), read("openblas_haswell"), read("onednn")
bl = read("blis") if have_blis else {}
print("| shape | op | M x N x K (x batch) | OpenBLAS | OpenBLAS, CORETYPE=Haswell"
      " | oneDNN | BLIS | oneDNN / OpenBLAS |")
print("|---|---|---|---|---|---|---|---|")
for shape, (trans, m, n, k, batch, g) in ob.items():
    dims = f"{m} x {n} x {k}" + (f" x {batch}" if batch != "1" else "")
    blis = f"{bl[shape][5]:.0f}" if shape in bl else "-"
    print(f"| {shape} | {trans} | {dims} | {g:.0f} | {obh[shape][5]:.0f} | "
          f"{dn[shape][5]:.0f} | {blis} | {dn[shape][5] / g:.2f} |")
PY
