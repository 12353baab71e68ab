#!/usr/bin/env bash
# The CUDA backend's GPU check, in two halves:
#
#   scripts/gpu-check.sh --prepare   on the CPU machine (CUDA toolkit, no GPU):
#                                    builds PFCudaKernelTests and packs it into
#                                    gpu-bundle/ (git-ignored, well under the
#                                    64 MiB a device call carries)
#   scripts/gpu-check.sh             on the GPU machine (one H200, PyTorch, no
#                                    MLIR, no package registry), with the
#                                    working tree and gpu-bundle/ carried over:
#                                    every CUDA kernel against the CPU backend,
#                                    then BERT-base-sized kernel timings against
#                                    PyTorch on the same GPU
#
# Results go to $OUT (the device machine's return folder) or ./gpu-check-out:
#   cuda-kernel-tests.log/.xml  GoogleTest output of CudaKernels.* / CudaBackend*
#   pf-kernels.jsonl            pf's kernel times (CudaBench.*)
#   kernels-vs-torch.json       the same ops timed with PyTorch, and the ratios
# The exit status is non-zero when a kernel test fails (3: no usable GPU, the
# tests were skipped). Everything is bounded
# by timeouts that keep the run inside 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${PF_GPU_BUNDLE:-gpu-bundle}

prepare() {
  local build=${PF_BUILD_DIR:-build}
  PF_BUILD_DIR=$build ./scripts/build.sh PFCudaKernelTests || exit 1
  local exe=$build/unittests/PFCudaKernelTests
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/lib"
  # Symbols are not needed to run; stripping halves the binary.
  strip --strip-unneeded -o "$BUNDLE/PFCudaKernelTests" "$exe"
  # libgomp is the one non-system, non-CUDA library the binary needs (the
  # GPU machine's PyTorch bundles its own under a hashed name).
  local gomp
  gomp=$(ldd "$exe" | awk '/libgomp/ {print $3}')
  [[ -n "$gomp" ]] && cp -L "$gomp" "$BUNDLE/lib/"
  {
    echo "commit $(git rev-parse HEAD)"
    echo "built $(date -u +%FT%TZ) on $(uname -n)"
    ldd "$exe"
  } > "$BUNDLE/MANIFEST"
  local size
  size=$(du -sm "$BUNDLE" | cut -f1)
  echo "gpu-bundle: ${size} MiB in $BUNDLE/"
  if (( size > 60 )); then
    echo "error: $BUNDLE/ is over 60 MiB; a device call carries at most 64 MiB" >&2
    exit 1
  fi
  echo "on the GPU machine: scripts/gpu-check.sh (carry: $BUNDLE)"
}

# Directories holding the CUDA libraries the binary links (cuBLAS 13,
# cuSOLVER 12 and what they load): the toolkit, else PyTorch's wheels.
cuda_library_path() {
  local dirs=() d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13*/lib64; do
    [[ -e $d/libcublas.so.13 ]] && dirs+=("$d")
  done
  local site
  site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for d in $site; do
    while IFS= read -r lib; do dirs+=("$(dirname "$lib")"); done < <(
      find "$d/nvidia" -maxdepth 4 \( -name 'libcublas.so.13' -o -name 'libcusolver.so.12' \
        -o -name 'libcusparse.so.12' -o -name 'libnvJitLink.so.13' -o -name 'libcublasLt.so.13' \) \
        2>/dev/null)
  done
  local IFS=:
  echo "${dirs[*]}"
}

run_checks() {
  local out=${OUT:-$PWD/gpu-check-out}
  mkdir -p "$out"
  local exe=$BUNDLE/PFCudaKernelTests
  if [[ ! -x $exe ]]; then
    echo "error: $exe is missing: run scripts/gpu-check.sh --prepare on the build machine and carry $BUNDLE" >&2
    exit 2
  fi
  echo "== GPU =="
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib:$(cuda_library_path):${LD_LIBRARY_PATH:-}"
  if ldd "$exe" | grep -q "not found"; then
    echo "error: libraries not found:" >&2
    ldd "$exe" | grep "not found" >&2
    exit 2
  fi
  echo "== CUDA kernels against the CPU backend =="
  timeout 240 "$exe" --gtest_filter='CudaKernels.*:CudaBackend*' \
    --gtest_output="xml:$out/cuda-kernel-tests.xml" 2>&1 | tee "$out/cuda-kernel-tests.log" |
    grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|error' | head -200
  local tests=${PIPESTATUS[0]}
  echo "== kernel timings: pf vs PyTorch (fp32, no TF32) =="
  rm -f "$out/pf-kernels.jsonl"
  PF_CUDA_BENCH_JSON="$out/pf-kernels.jsonl" timeout 120 "$exe" --gtest_filter='CudaBench.*' \
    > "$out/pf-bench.log" 2>&1 || echo "pf benchmarks failed (see $out/pf-bench.log)"
  timeout 150 python3 scripts/gpu_bench_torch.py --pf "$out/pf-kernels.jsonl" \
    --out "$out/kernels-vs-torch.json" || echo "PyTorch benchmarks failed"
  echo
  if grep -q "no usable GPU" "$out/cuda-kernel-tests.log"; then
    echo "gpu-check: no usable GPU: the CUDA kernel tests were SKIPPED ($(grep -m1 -o 'no usable GPU.*' "$out/cuda-kernel-tests.log"))"
    return 3
  fi
  if [[ $tests -eq 0 ]]; then
    echo "gpu-check: CUDA kernel tests passed"
  else
    echo "gpu-check: CUDA kernel tests FAILED (exit $tests; see $out/cuda-kernel-tests.log)"
  fi
  return "$tests"
}

case "${1:-}" in
  --prepare) prepare ;;
  "") run_checks ;;
  *) echo "usage: $0 [--prepare]" >&2; exit 2 ;;
esac
