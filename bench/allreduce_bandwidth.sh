#!/usr/bin/env bash
# OSU-style MPI_Allreduce latency/bandwidth on this machine (float sums,
# 1 KiB ... 64 MiB, 2 ranks): the reference bench/pipeline_execution.py --osu
# compares the replica gradient all-reduce with. Not a test.
#   bench/allreduce_bandwidth.sh [--json FILE] [--min BYTES] [--max BYTES]
#       [--iterations N] [--warmup N]
# Compiled with mpicxx -O2 into a temporary directory; run under
# mpirun --oversubscribe -np 2 (--allow-run-as-root as root), the launcher and
# transport pf-train's pipeline uses. Set NP to run on more ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
${MPICXX:-mpicxx} -O2 -std=c++17 bench/allreduce_bandwidth.cpp -o "$OUT/allreduce_bandwidth"
ROOT=()
if [ "$(id -u)" = 0 ]; then ROOT=(--allow-run-as-root); fi
echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)," \
  "$(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
mpirun --oversubscribe "${ROOT[@]}" -np "${NP:-2}" "$OUT/allreduce_bandwidth" "$@"
