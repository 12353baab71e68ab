#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite: lit/FileCheck,
# GoogleTest (through ctest) and pytest; the normal run installs the Python
# package (pip install .) into a fresh virtual environment first and runs
# pytest against it (the sanitized runs test the source tree, without the
# compiled bindings). Exits non-zero when anything fails.
#
#   ./scripts/test.sh                    the normal build (build/)
#   ./scripts/test.sh --sanitize         every suite against a build with
#                                        AddressSanitizer and UBSan (build-asan/)
#   ./scripts/test.sh --sanitize-subset  the sanitized subset CI runs: the unit
#                                        tests and bad-input tests that need no
#                                        MLIR-linked tool (fast to build)
#   ./scripts/test.sh --ci               the normal suites, then the subset
#
# Sanitized runs: ASAN_OPTIONS/UBSAN_OPTIONS below (override by setting them);
# leak detection is off (LLVM's and MLIR's static objects are never freed), a
# report aborts, so `not TOOL` and exit-status checks see a crash, and
# verify_asan_link_order=0 lets the AOT tests' plain C drivers load the
# sanitized libpfrt.so (which brings the runtime in after libc).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=normal
case "${1:-}" in
  "") ;;
  --sanitize) MODE=sanitize ;;
  --sanitize-subset) MODE=subset ;;
  --ci) MODE=ci ;;
  *) echo "usage: $0 [--sanitize | --sanitize-subset | --ci]" >&2; exit 2 ;;
esac
./scripts/setup.sh || exit 1

LIT=$(command -v /usr/lib/llvm-22/bin/lit || command -v lit)
passed=0; failed=0; skipped=0; gpu_skipped=0; status=0

# lit over the given test directories of $BUILD_DIR (all of test/ by default).
run_lit() {
  local log="$LOG_DIR/lit.log"
  echo "== lit (FileCheck) =="
  "$LIT" -sv "${@:-$BUILD_DIR/test}" 2>&1 | tee "$log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
  local p f
  p=$(sed -n 's/^ *Passed *: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  f=$(sed -n 's/^ *Failed *: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
  local u
  u=$(sed -n 's/^ *Unsupported *: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  skipped=$((skipped + ${u:-0}))
}

run_ctest() {
  local log="$LOG_DIR/ctest.log"
  echo "== GoogleTest (ctest) =="
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 2>&1 | tee "$log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
  local total f
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$log" | tail -1)
  f=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  # GTEST_SKIP tests (the CUDA kernel tests without a GPU) are listed as
  # "(Skipped)": not passed, counted apart.
  local s g
  s=$(grep -c '(Skipped)' "$log")
  g=$(grep '(Skipped)' "$log" | grep -c -E 'Cuda(Kernels|Bench)\.')
  passed=$((passed + ${total:-0} - ${f:-0} - ${s:-0})); failed=$((failed + ${f:-0}))
  skipped=$((skipped + ${s:-0})); gpu_skipped=$((gpu_skipped + ${g:-0}))
}

# GoogleTest executables run directly (ctest would also list the tests of
# executables the subset does not build).
run_gtests() {
  echo "== GoogleTest (sanitized subset) =="
  local exe log p f
  for exe in "$@"; do
    log="$LOG_DIR/$exe.log"
    "$BUILD_DIR/unittests/$exe" 2>&1 | tee "$log" | tail -3
    [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    [[ -n "$p$f" ]] || f=1 # it died before GoogleTest's summary
    passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))
    local s
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    skipped=$((skipped + ${s:-0}))
  done
}

# pip install . into a fresh virtual environment ($BUILD_DIR/py-venv): the
# package builds its extension in build-py/ (pyproject.toml) with the normal
# build's compilers, so that the compiler cache serves it the object files of
# build/. The environment sees the system's site-packages (numpy, onnx,
# onnxruntime, pytest, scikit-build-core and nanobind, as setup.sh pinned them)
# but no pipefisher. Sets PYTHON_PACKAGE_VENV when the package is installed.
PYTHON_PACKAGE_VENV=""
install_python_package() {
  local venv="$ROOT/$BUILD_DIR/py-venv" log="$LOG_DIR/pip-install.log" start=$SECONDS
  echo "== Python package (pip install . into a fresh virtual environment) =="
  rm -rf "$venv"
  if ! python3 -m venv --system-site-packages "$venv" >"$log" 2>&1 ||
     ! CC=$(sed -n 's/^CMAKE_C_COMPILER:FILEPATH=//p' "$BUILD_DIR/CMakeCache.txt") \
       CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$BUILD_DIR/CMakeCache.txt") \
       CCACHE_BASEDIR=$ROOT CMAKE_BUILD_PARALLEL_LEVEL=${PF_JOBS:-$(nproc)} \
       "$venv/bin/python" -m pip install --no-build-isolation --disable-pip-version-check \
       -v . >>"$log" 2>&1; then
    tail -40 "$log"
    echo "pip install . failed (see $log); pytest runs on the source tree instead"
    status=1; failed=$((failed + 1))
    return
  fi
  echo "installed $(grep -o 'Successfully installed .*' "$log") in $((SECONDS - start)) s"
  PYTHON_PACKAGE_VENV=$venv
}

# Adds the counts of a pytest log's summary line to the totals.
count_pytest() {
  local log=$1 line p f s
  line=$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1)
  p=$(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p; s/^\([0-9]*\) passed.*/\1/p' | head -1)
  f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p; s/^\([0-9]*\) failed.*/\1/p' | head -1)
  s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p; s/^\([0-9]*\) skipped.*/\1/p' | head -1)
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0})); skipped=$((skipped + ${s:-0}))
}

# The whole suite against the installed package (bindings included;
# PF_TEST_INSTALLED: conftest.py checks that pipefisher comes from the venv),
# or from the source tree (PYTHONPATH=python; the binding tests skip there)
# when the package could not be installed.
run_pytest() {
  local log="$LOG_DIR/pytest.log"
  if [[ -n "$PYTHON_PACKAGE_VENV" ]]; then
    echo "== pytest (installed package, $PYTHON_PACKAGE_VENV) =="
    (unset PYTHONPATH; PF_TEST_INSTALLED=1 PF_BUILD_DIR="$ROOT/$BUILD_DIR" \
      "$PYTHON_PACKAGE_VENV/bin/python" -m pytest -q python/tests) 2>&1 | tee "$log"
  else
    echo "== pytest =="
    PYTHONPATH="$ROOT/python" PF_BUILD_DIR="$ROOT/$BUILD_DIR" python3 -m pytest -q python/tests 2>&1 | tee "$log"
  fi
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
  count_pytest "$log"
}

normal_suites() {
  BUILD_DIR=${PF_BUILD_DIR:-build}
  PF_BUILD_DIR=$BUILD_DIR ./scripts/build.sh || exit 1
  LOG_DIR="$BUILD_DIR/test-logs"
  mkdir -p "$LOG_DIR"
  run_lit
  run_ctest
  install_python_package
  run_pytest
}

# The sanitized build: build-asan/, the same compiler, -fsanitize=address,undefined
# (CMakeLists.txt, PF_SANITIZE).
sanitized_env() {
  BUILD_DIR=${PF_ASAN_BUILD_DIR:-build-asan}
  LOG_DIR="$BUILD_DIR/test-logs"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0:verify_asan_link_order=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}
  export PF_CMAKE_ARGS="-DPF_SANITIZE=address,undefined ${PF_CMAKE_ARGS:-}"
}

# Unit tests without MLIR, and pf-sched's lit tests (malformed profiles and
# options among them): each needs only the schedule library, the runtime or
# LLVM Support, so CI builds them sanitized in minutes.
SUBSET_GTESTS=(PFScheduleTests PFRuntimeTests PFRuntimeAbiTableTests PFMeasuredTimelineTests
               PFTransformsTests)
sanitized_subset() {
  sanitized_env
  echo "== sanitized subset ($BUILD_DIR) =="
  PF_BUILD_DIR=$BUILD_DIR ./scripts/build.sh "${SUBSET_GTESTS[@]}" pf-sched || exit 1
  mkdir -p "$LOG_DIR"
  run_gtests "${SUBSET_GTESTS[@]}"
  run_lit "$BUILD_DIR/test/pf-sched"
}

sanitized_suites() {
  sanitized_env
  echo "== sanitized suites ($BUILD_DIR) =="
  PF_BUILD_DIR=$BUILD_DIR ./scripts/build.sh || exit 1
  mkdir -p "$LOG_DIR"
  run_lit
  run_ctest
  run_pytest
}

case $MODE in
  normal) normal_suites ;;
  sanitize) sanitized_suites ;;
  subset) sanitized_subset ;;
  ci) normal_suites; sanitized_subset ;;
esac

echo
echo "total: $passed passed, $failed failed"
echo "skipped: $skipped ($gpu_skipped GPU tests: no usable GPU here; scripts/gpu-check.sh runs them on one)"
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  echo "a suite failed without a failing test (see $LOG_DIR)"
fi
exit $status
