#!/usr/bin/env bash
# The CUDA backend's GPU check, in two halves:
#
#   scripts/gpu-check.sh --prepare   on the CPU machine (CUDA toolkit, MLIR, no
#                                    GPU): builds PFCudaKernelTests,
#                                    pf-aot-run-portable and pf-trainer-portable,
#                                    compiles BERT-tiny, -mini and -base ahead of
#                                    time (forward, AdamW step, K-FAC step;
#                                    scripts/gpu_models.py) and BERT-mini's
#                                    training artifacts (scripts/gpu_training.py)
#                                    and packs it all into gpu-bundle/bundle.tar.xz
#                                    (git-ignored; a device call carries 64 MiB)
#   scripts/gpu-check.sh             on the GPU machine (one H200, PyTorch, no
#                                    MLIR, no package registry), with the
#                                    working tree and gpu-bundle/ carried over
#
# On the GPU machine, in this order (what matters most first), inside a time
# budget (PF_GPU_CHECK_BUDGET seconds, default 420) that every step's timeout
# respects:
#   1. every model on the CPU backend and on the CUDA backend: outputs compared
#      (fp32 bar 1e-4), the CUDA step timed          -> models.json
#      and the training artifacts trained 20 steps by pf-trainer on both
#      backends: losses compared (1e-3), ms/step     -> training.json
#   2. every CUDA kernel against the CPU backend     -> cuda-kernel-tests.log/.xml
#   3. the same BERT models in PyTorch, same GPU     -> torch-bert*.json, summary.json
#      (fp32; BERT-base also with TF32 and bf16 against pf's --gemm-precision)
#   4. BERT-base-sized kernels, pf vs PyTorch        -> pf-kernels.jsonl, kernels-vs-torch.json
# Results go to $OUT (the device machine's return folder) or ./gpu-check-out.
# The exit status is non-zero when a model or a kernel test fails (3: no
# usable GPU, the tests were skipped).
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${PF_GPU_BUNDLE:-gpu-bundle}

prepare() {
  local build=${PF_BUILD_DIR:-build}
  PF_BUILD_DIR=$build ./scripts/build.sh PFCudaKernelTests pf-aot-run-portable pf-run \
    pf-train pf-trainer-portable || exit 1
  local stage=${PF_GPU_STAGE:-$build/gpu-stage}
  rm -rf "$stage" && mkdir -p "$stage/lib"
  # Symbols are not needed to run (the runner's exported pfrt_* stay in
  # .dynsym); stripping halves the binaries.
  strip --strip-unneeded -o "$stage/PFCudaKernelTests" "$build/unittests/PFCudaKernelTests"
  strip --strip-unneeded -o "$stage/pf-aot-run-portable" "$build/bin/pf-aot-run-portable"
  strip --strip-unneeded -o "$stage/pf-trainer-portable" "$build/bin/pf-trainer-portable"
  # libgomp, libgfortran and libquadmath are the non-system, non-CUDA
  # libraries the binaries need (the GPU machine's PyTorch bundles its own
  # libgomp under a hashed name); libzip the trainer's (corpus, checkpoints).
  local lib
  for lib in $( (ldd "$build/unittests/PFCudaKernelTests"; ldd "$build/bin/pf-trainer-portable") |
      awk '/libgomp|libgfortran|libquadmath|libzip/ {print $3}' | sort -u); do
    cp -L "$lib" "$stage/lib/"
  done
  python3 scripts/gpu_models.py prepare --build "$build" --out "$stage" \
    --models "${PF_GPU_MODELS:-tiny,mini,base}" || exit 1
  python3 scripts/gpu_training.py prepare --build "$build" --out "$stage" \
    --models "${PF_GPU_TRAINING_MODELS:-mini}" || exit 1
  {
    echo "commit $(git rev-parse HEAD)"
    echo "built $(date -u +%FT%TZ) on $(uname -n)"
    ldd "$build/unittests/PFCudaKernelTests"
  } > "$stage/MANIFEST"
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
  echo "packing $(du -sh "$stage" | cut -f1) into $BUNDLE/bundle.tar.xz"
  tar cf - -C "$stage" . | xz -T2 -1 > "$BUNDLE/bundle.tar.xz" || exit 1
  cp "$stage/MANIFEST" "$BUNDLE/"
  rm -rf "$stage"
  local size
  size=$(du -sm "$BUNDLE" | cut -f1)
  echo "gpu-bundle: ${size} MiB in $BUNDLE/"
  if (( size > 60 )); then
    echo "error: $BUNDLE/ is over 60 MiB; a device call carries at most 64 MiB" >&2
    exit 1
  fi
  echo "on the GPU machine: scripts/gpu-check.sh (carry: $BUNDLE)"
}

# Directories holding the CUDA libraries the binaries load (cuBLAS 13,
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

START=$SECONDS
BUDGET=${PF_GPU_CHECK_BUDGET:-420}
# The timeout of a step: its own limit, or what is left of the budget.
step_timeout() {
  local left=$((BUDGET - (SECONDS - START)))
  (( left < 5 )) && left=5
  (( $1 < left )) && echo "$1" || echo "$left"
}

run_checks() {
  local out=${OUT:-$PWD/gpu-check-out}
  mkdir -p "$out"
  if [[ ! -f $BUNDLE/bundle.tar.xz ]]; then
    echo "error: $BUNDLE/bundle.tar.xz is missing: run scripts/gpu-check.sh --prepare on the build machine and carry $BUNDLE" >&2
    exit 2
  fi
  echo "== GPU =="
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  local x=${PF_GPU_WORK:-/tmp/pf-gpu-check}
  rm -rf "$x" && mkdir -p "$x"
  echo "== unpacking the bundle ($(du -sh "$BUNDLE/bundle.tar.xz" | cut -f1)) =="
  if ! timeout "$(step_timeout 120)" tar xJf "$BUNDLE/bundle.tar.xz" -C "$x"; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$BUNDLE/bundle.tar.xz" "$x" || exit 2
  fi
  cat "$x/MANIFEST" | head -2
  echo "   unpacked in $((SECONDS - START)) s"
  export LD_LIBRARY_PATH="$x/lib:$(cuda_library_path):${LD_LIBRARY_PATH:-}"
  local exe
  for exe in "$x/PFCudaKernelTests" "$x/pf-aot-run-portable" "$x/pf-trainer-portable"; do
    if ldd "$exe" | grep -q "not found"; then
      echo "error: libraries of $exe not found:" >&2
      ldd "$exe" | grep "not found" >&2
      exit 2
    fi
  done

  echo "== 1. models: CPU backend vs CUDA backend, and the CUDA step time =="
  timeout "$(step_timeout 240)" python3 scripts/gpu_models.py check --bundle "$x" --out "$out" \
    --work "$x/work" --time-budget "$(( $(step_timeout 240) - 30 ))"
  local models=$?
  echo "== 1b. training artifacts: pf-trainer on the CPU and the CUDA backend =="
  timeout "$(step_timeout 120)" python3 scripts/gpu_training.py check --bundle "$x" --out "$out" \
    --time-budget "$(( $(step_timeout 120) - 10 ))"
  local training=$?

  echo "== 2. CUDA kernels against the CPU backend =="
  timeout "$(step_timeout 120)" "$x/PFCudaKernelTests" --gtest_filter='CudaKernels.*:CudaBackend*' \
    --gtest_output="xml:$out/cuda-kernel-tests.xml" 2>&1 | tee "$out/cuda-kernel-tests.log" |
    grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|error' | head -200
  local tests=${PIPESTATUS[0]}

  echo "== 3. the same models in PyTorch (fp32, no TF32), same GPU =="
  local torch_budget
  torch_budget=$(step_timeout 120)
  timeout "$torch_budget" python3 scripts/gpu_bench_torch_bert.py --configs mini,base \
    --time-budget "$(( torch_budget - 20 ))" --out "$out/torch-bert.json" ||
    echo "PyTorch model benchmarks failed or were cut short"
  local p
  for p in tf32 bf16; do
    torch_budget=$(step_timeout 45)
    timeout "$torch_budget" python3 scripts/gpu_bench_torch_bert.py --configs base "--$p" \
      --time-budget "$(( torch_budget - 10 ))" --out "$out/torch-bert-$p.json" ||
      echo "PyTorch $p benchmarks failed or were cut short"
  done
  python3 scripts/gpu_models.py summary --models "$out/models.json" --torch "$out/torch-bert.json" \
    --torch-tf32 "$out/torch-bert-tf32.json" --torch-bf16 "$out/torch-bert-bf16.json" \
    --out "$out/summary.json" || true

  echo "== 4. kernel timings: pf vs PyTorch (fp32, no TF32) =="
  if (( SECONDS - START < BUDGET - 60 )); then
    rm -f "$out/pf-kernels.jsonl"
    PF_CUDA_BENCH_JSON="$out/pf-kernels.jsonl" timeout "$(step_timeout 60)" "$x/PFCudaKernelTests" \
      --gtest_filter='CudaBench.*' > "$out/pf-bench.log" 2>&1 ||
      echo "pf benchmarks failed (see $out/pf-bench.log)"
    timeout "$(step_timeout 90)" python3 scripts/gpu_bench_torch.py --pf "$out/pf-kernels.jsonl" \
      --out "$out/kernels-vs-torch.json" || echo "PyTorch kernel benchmarks failed"
  else
    echo "skipped: the time budget is used up"
  fi
  echo
  echo "gpu-check: finished in $((SECONDS - START)) s"
  if grep -q "no usable GPU" "$out/cuda-kernel-tests.log"; then
    echo "gpu-check: no usable GPU: the CUDA kernel tests were SKIPPED ($(grep -m1 -o 'no usable GPU.*' "$out/cuda-kernel-tests.log"))"
    return 3
  fi
  [[ $tests -eq 0 ]] && echo "gpu-check: CUDA kernel tests passed" ||
    echo "gpu-check: CUDA kernel tests FAILED (exit $tests; see $out/cuda-kernel-tests.log)"
  [[ $models -eq 0 ]] && echo "gpu-check: models match the CPU backend" ||
    echo "gpu-check: models FAILED or were cut short (exit $models; see $out/models.json)"
  [[ $training -eq 0 ]] && echo "gpu-check: training artifacts train as on the CPU backend" ||
    echo "gpu-check: training FAILED or was cut short (exit $training; see $out/training.json)"
  (( tests == 0 && models == 0 && training == 0 ))
}

case "${1:-}" in
  --prepare) prepare ;;
  "") run_checks ;;
  *) echo "usage: $0 [--prepare]" >&2; exit 2 ;;
esac
