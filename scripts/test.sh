#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite: lit/FileCheck,
# GoogleTest (through ctest) and pytest. Exits non-zero when anything fails.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${PF_BUILD_DIR:-build}
./scripts/setup.sh || exit 1
./scripts/build.sh || exit 1

LOG_DIR="$BUILD_DIR/test-logs"
mkdir -p "$LOG_DIR"
LIT=$(command -v /usr/lib/llvm-22/bin/lit || command -v lit)
passed=0; failed=0; status=0

echo "== lit (FileCheck) =="
"$LIT" -sv "$BUILD_DIR/test" 2>&1 | tee "$LOG_DIR/lit.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
p=$(sed -n 's/^ *Passed *: *\([0-9]*\).*/\1/p' "$LOG_DIR/lit.log" | tail -1)
f=$(sed -n 's/^ *Failed *: *\([0-9]*\).*/\1/p' "$LOG_DIR/lit.log" | tail -1)
passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))

echo "== GoogleTest (ctest) =="
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 2>&1 | tee "$LOG_DIR/ctest.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$LOG_DIR/ctest.log" | tail -1)
f=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1/p' "$LOG_DIR/ctest.log" | tail -1)
passed=$((passed + ${total:-0} - ${f:-0})); failed=$((failed + ${f:-0}))

echo "== pytest =="
PYTHONPATH="$ROOT/python" PF_BUILD_DIR="$ROOT/$BUILD_DIR" python3 -m pytest -q python/tests 2>&1 | tee "$LOG_DIR/pytest.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
line=$(grep -E '[0-9]+ (passed|failed)' "$LOG_DIR/pytest.log" | tail -1)
p=$(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p; s/^\([0-9]*\) passed.*/\1/p' | head -1)
f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p; s/^\([0-9]*\) failed.*/\1/p' | head -1)
passed=$((passed + ${p:-0})); failed=$((failed + ${f:-0}))

echo
echo "total: $passed passed, $failed failed"
if [[ $status -ne 0 && $failed -eq 0 ]]; then
  echo "a suite failed without a failing test (see $LOG_DIR)"
fi
exit $status
